"""The tiny refund agent (lookup_policy → issue_refund) in each framework, built against a model endpoint and a
TracerProvider. Tests and bench/ingest.py run them against the stand-in provider. Frameworks are imported only
when their agent is built."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .expect import issue_refund_text, lookup_policy_text

MODEL = "claude-haiku-4-5"
PROMPT = "You are a support agent."
Run = Callable[[str], Any]


def pydantic_ai(base_url: str, tracer_provider: Any) -> Run:
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=base_url + "/v1", api_key="k"))
    agent = Agent(model, system_prompt=PROMPT, name="support")
    agent.instrument = InstrumentationSettings(tracer_provider=tracer_provider)

    @agent.tool_plain
    def lookup_policy(topic: str) -> str:
        return lookup_policy_text(topic)

    @agent.tool_plain
    def issue_refund(order_id: str, amount: float) -> str:
        return issue_refund_text(order_id, amount)

    return agent.run_sync


def langgraph(base_url: str, tracer_provider: Any) -> tuple[Run, Any]:
    """The run and the instrumentor (to uninstrument)."""
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent
    from openinference.instrumentation.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)

    @tool
    def lookup_policy(topic: str) -> str:
        """The refund policy on a topic."""
        return lookup_policy_text(topic)

    @tool
    def issue_refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        return issue_refund_text(order_id, amount)

    graph = create_react_agent(
        ChatOpenAI(model=MODEL, base_url=base_url + "/v1", api_key="k"), [lookup_policy, issue_refund], prompt=PROMPT
    )
    return (lambda task: graph.invoke({"messages": [("user", task)]})), instrumentor


def openai_agents(base_url: str, tracer_provider: Any, *, strict: bool = False) -> tuple[Run, Any]:
    """`strict`: issue_refund's errors end the run (failure_error_function=None) instead of going to the model."""
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from openai import AsyncOpenAI
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    instrumentor = OpenAIAgentsInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=tracer_provider)

    @function_tool
    def lookup_policy(topic: str) -> str:
        """The refund policy on a topic."""
        return lookup_policy_text(topic)

    def issue_refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        return issue_refund_text(order_id, amount)

    refund = function_tool(issue_refund, failure_error_function=None) if strict else function_tool(issue_refund)
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=AsyncOpenAI(base_url=base_url + "/v1", api_key="k"))
    agent = Agent(name="support", instructions=PROMPT, tools=[lookup_policy, refund], model=model)
    return (lambda task: Runner.run_sync(agent, task)), instrumentor


def strands(base_url: str) -> Run:
    """strands traces to the global TracerProvider; a new Agent per run (an Agent keeps its conversation)."""
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    @tool
    def lookup_policy(topic: str) -> str:
        """The refund policy on a topic."""
        return lookup_policy_text(topic)

    @tool
    def issue_refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        return issue_refund_text(order_id, amount)

    model = OpenAIModel(client_args={"base_url": base_url + "/v1", "api_key": "k"}, model_id=MODEL)

    def run(task: str) -> Any:
        agent = Agent(model=model, tools=[lookup_policy, issue_refund], system_prompt=PROMPT, callback_handler=None)
        return agent(task)

    return run
