"""What each tracing convention says about messages and tool calls, read into one shape (`messages.Message`):

- `genai`: the OpenTelemetry GenAI semantic conventions (`gen_ai.input.messages`, `gen_ai.output.messages`,
  `gen_ai.tool.call.*`), as the openai-v2 instrumentation, pydantic-ai and strands-agents (latest conventions) emit;
- `openinference`: OpenInference (`llm.input_messages.*`, `llm.output_messages.*`, `input.value`, `output.value`),
  as its langchain/LangGraph, openai-agents, openai and anthropic instrumentors emit;
- `strands`: strands-agents' default span events (`gen_ai.user.message`, `gen_ai.choice`, `gen_ai.tool.message`)
  with Bedrock-style content blocks.

Pure: no Django, no I/O.
"""
