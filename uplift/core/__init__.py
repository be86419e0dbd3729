"""Certified uplift, pure: paired certificates, confidence bounds by betting, the reuse budget of a held-out split."""
