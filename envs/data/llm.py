"""An OpenAI-compatible endpoint for the curation stages that ask an LLM (difficulty, input shapes).

The transport is the anti-hack judge's (envs/antihack/judge.py): the same endpoint settings (`JudgeConfig`:
base_url, api_key_env, timeouts, retries with backoff on 429/5xx/connection errors, a client-side rate
limit) and its SQLite answer cache, keyed by model and prompt, so a re-run of the pipeline asks nothing
twice. Only the prompts and the parsing of answers belong to the stages.
"""

from __future__ import annotations

from typing import Any, Mapping

from envs.antihack.judge import JudgeCache, JudgeConfig, LLMJudge

__all__ = ["CurationLLM", "LLMUnavailable"]


class LLMUnavailable(RuntimeError):
    """No answer: no key, the endpoint failed after its retries, or it returned nothing."""


class CurationLLM:
    def __init__(self, config: JudgeConfig):
        # json_mode is the hack judge's answer format; curation prompts ask for their own format.
        self.config = config
        self._transport = LLMJudge(config)

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> CurationLLM:
        return cls(JudgeConfig.from_mapping({**dict(m), "enabled": True}))

    @property
    def model(self) -> str:
        return self.config.model

    def ask(self, system: str, user: str) -> tuple[str, bool]:
        """(the answer's text, whether it came from the cache)."""
        import openai

        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        key = JudgeCache.key(self.config.model, messages)
        cache = self._transport.cache
        if cache is not None and (hit := cache.get(key)) is not None:
            return hit["content"], True
        api_key, why_not = self._transport._api_key()
        if why_not is not None:
            raise LLMUnavailable(why_not)
        try:
            content, _ = self._transport._request(self._transport._get_client(api_key), messages)
        except openai.OpenAIError as e:
            raise LLMUnavailable(f"{type(e).__name__}: {str(e)[:200]}") from None
        except Exception as e:  # the judge's _Transient after the last retry, among others
            raise LLMUnavailable(f"{type(e).__name__}: {str(e)[:200]}") from None
        if not content:
            raise LLMUnavailable("the endpoint returned an empty answer")
        if cache is not None:
            cache.put(key, self.config.model, {"content": content})
        return content, False
