"""Pure algorithms of rubrics: no Django import, no I/O (import-linter's cores contract). The rubric document, its
parsing and scoring (rubrics.py), the two model roles' prompts (prompts.py) and inter-rater agreement
(agreement.py)."""
