"""KernelRL's /reward as the grader of an RFT job: the grader JSON, the URL checks and a self-check.

OpenAI's public grader types (string_check, text_similarity, score_model, python, multi; openai 3.57's
`ReinforcementMethodParam.grader`) cannot grade a kernel: it must be compiled, run and timed on a GPU, and the
python grader runs in OpenAI's sandbox without GPU or network. Graders that call an HTTP endpoint exist only
as a gated preview whose schema is not in the SDK, so the JSON below is ours, built from one mapping:

    request (POST <url>, JSON):  {"problem_id":     "{{item.problem_id}}",      <- the dataset row's field
                                  "problem_sha256": "{{item.problem_sha256}}",  <- the service answers 409
                                  "solution":       "{{sample.output_text}}"}   <- the model's answer
    headers:                     Authorization: Bearer <KERNELRL_SERVICE_TOKEN>
    response (200, JSON):        {"reward": float in [0, 1], "status": ..., "cached": ...}; score = "reward"

`grader.spec_overrides` merges other field names over it where an organization's preview names them
differently. The token travels only in this JSON to OpenAI (HTTPS) and is redacted wherever we log or save it.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import urllib.parse
from typing import Any, Mapping

from rl.hosted.config import GraderConfig
from rl.hosted.errors import EXIT_CONFIG, EXIT_GRADER, HostedError

__all__ = [
    "PYTHON_GRADER_REFUSAL",
    "REQUEST_TEMPLATE",
    "SCORE_FIELD",
    "SELF_CHECK_NON_KERNEL",
    "check_grader_url",
    "endpoint_grader",
    "grader_token",
    "redacted",
    "render_request",
    "self_check",
]

REQUEST_TEMPLATE = {
    "problem_id": "{{item.problem_id}}",
    "problem_sha256": "{{item.problem_sha256}}",
    "solution": "{{sample.output_text}}",
}
SCORE_FIELD = "reward"
REDACTED = "Bearer <redacted>"

PYTHON_GRADER_REFUSAL = (
    "hosted.grader.kind=python cannot grade kernels: OpenAI runs python graders in a sandbox without a GPU and "
    "without network access, so a candidate kernel can be neither run nor timed there, and a grader that only "
    "reads the text would reward code that does not work. KernelRL grades through an endpoint grader (OpenAI "
    "calls the KernelRL evaluation service's /reward over HTTPS), a gated preview OpenAI enables per "
    "organization. Without it, train an open model on the same recipe (python scripts/train.py "
    "+experiment=gpt5_triton policy=qwen2_5_coder_7b) or measure the hosted model without training "
    "(python scripts/benchmark.py policy=gpt5 attempts=3). Nothing was uploaded."
)


def grader_token(config: GraderConfig, environ: Mapping[str, str]) -> str:
    token = environ.get(config.token_env, "").strip()
    if not token:
        raise HostedError(
            f"no grader token: set {config.token_env} (the evaluation service's bearer token, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'); OpenAI sends it with "
            "every grading request and the service refuses requests without it",
            EXIT_CONFIG,
        )
    if len(token) < 16:
        raise HostedError(
            f"{config.token_env} is shorter than 16 characters; the service refuses such tokens", EXIT_CONFIG
        )
    return token


def _private(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    return ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or ip.is_unspecified or ip.is_multicast


def check_grader_url(url: str | None, allow_private: bool = False, resolve=socket.getaddrinfo) -> str:
    """The URL OpenAI will call, checked as far as this machine can: https, a /reward path, a host that resolves
    to public addresses only. Reachability from the internet itself cannot be tested from here."""
    if not url:
        raise HostedError(
            "hosted.grader.url is not set: give the public https URL at which OpenAI reaches the "
            "KernelRL service's /reward (e.g. hosted.grader.url=https://grader.example.org/reward); "
            "docs/hosted.md says what to expose and how",
            EXIT_CONFIG,
        )
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "https" and not (allow_private and parsed.scheme == "http"):
        raise HostedError(
            f"hosted.grader.url {url!r}: must be https (the bearer token travels with every request)", EXIT_CONFIG
        )
    if not parsed.hostname:
        raise HostedError(f"hosted.grader.url {url!r}: no host", EXIT_CONFIG)
    if not parsed.path.rstrip("/").endswith("/reward"):
        raise HostedError(
            f"hosted.grader.url {url!r}: must be the service's /reward endpoint (the grader's "
            "request and response are mapped onto it)",
            EXIT_CONFIG,
        )
    if parsed.username or parsed.password or parsed.query or parsed.fragment:
        raise HostedError(
            f"hosted.grader.url: no credentials, query or fragment in the URL (the token goes in "
            f"{GraderConfig.token_env}, sent as a header)",
            EXIT_CONFIG,
        )
    if not allow_private:
        try:
            addresses = {info[4][0] for info in resolve(parsed.hostname, parsed.port or 443, 0, socket.SOCK_STREAM)}
        except (socket.gaierror, UnicodeError) as e:
            raise HostedError(
                f"hosted.grader.url: {parsed.hostname} does not resolve ({e}); OpenAI could not reach the grader",
                EXIT_CONFIG,
            ) from None
        private = sorted(a for a in addresses if _private(a))
        if private:
            raise HostedError(
                f"hosted.grader.url: {parsed.hostname} resolves to non-public addresses {private}; "
                "OpenAI calls the grader from the internet and cannot reach it. Expose the service "
                "through a TLS reverse proxy or tunnel with a public name",
                EXIT_CONFIG,
            )
    return url


def endpoint_grader(config: GraderConfig, url: str, token: str) -> dict[str, Any]:
    """The grader JSON sent as method.reinforcement.grader (holds the token: never log it, use redacted())."""
    spec = {
        "type": config.type,
        "name": config.name,
        "url": url,
        "method": "POST",
        "headers": {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        "request_body": dict(REQUEST_TEMPLATE),
        "score_field": SCORE_FIELD,
        "timeout_s": config.timeout_s,
    }
    spec.update(json.loads(json.dumps(dict(config.spec_overrides))))
    return spec


def redacted(value: Any, token: str | None = None) -> Any:
    """`value` (grader JSON, job body, message) with the Authorization header and the token itself replaced."""
    if isinstance(value, Mapping):
        return {k: (REDACTED if str(k).lower() == "authorization" else redacted(v, token)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted(v, token) for v in value]
    if isinstance(value, str) and token and token in value:
        return value.replace(token, "<redacted>")
    return value


def render_request(
    item: Mapping[str, Any], output_text: str, template: Mapping[str, str] = REQUEST_TEMPLATE
) -> dict[str, Any]:
    """The body the grader sends for one sample: `{{item.x}}` and `{{sample.output_text}}` substituted."""
    values = {f"{{{{item.{k}}}}}": v for k, v in item.items()}
    values["{{sample.output_text}}"] = output_text
    body = {}
    for field, placeholder in template.items():
        if placeholder not in values:
            raise HostedError(
                f"grader request field {field!r}: {placeholder} is not in the dataset row (it has {sorted(item)})",
                EXIT_CONFIG,
            )
        body[field] = values[placeholder]
    return body


SELF_CHECK_NON_KERNEL = "```python\n# kernelrl grader self-check: no ModelNew here\n```"


def self_check(
    url: str, token: str, item: Mapping[str, Any], solution: str | None, timeout_s: float = 300.0, verify: bool = True
) -> dict[str, Any]:
    """What OpenAI's grader will do, done from here before any upload: POST an answer exactly as mapped and
    the same without the token (must be 401). With a known-correct `solution` the answer must be 200, status
    correct, 0 < reward <= 1; without one (KernelBench has no reference kernels) an answer with no ModelNew
    must come back compile_error with reward 0, which proves the round trip but not the GPU path."""
    import httpx

    expect_correct = solution is not None
    body = render_request(item, solution if expect_correct else SELF_CHECK_NON_KERNEL)
    try:
        with httpx.Client(timeout=timeout_s, verify=verify) as client:
            anonymous = client.post(url, json=body)
            answer = client.post(url, json=body, headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as e:
        raise HostedError(f"grader self-check: cannot reach {url}: {type(e).__name__}: {e}", EXIT_GRADER) from None
    if anonymous.status_code != 401:
        raise HostedError(
            f"grader self-check: {url} answered {anonymous.status_code} to a request without the "
            "token (must be 401): the service must not grade for anyone who finds the URL",
            EXIT_GRADER,
        )
    if answer.status_code != 200:
        raise HostedError(
            f"grader self-check: {url} answered {answer.status_code} for {item.get('problem_id')}: "
            f"{redacted(answer.text[:500], token)}",
            EXIT_GRADER,
        )
    try:
        result = answer.json()
        score = float(result[SCORE_FIELD])
    except (ValueError, KeyError, TypeError):
        raise HostedError(
            f"grader self-check: {url} did not answer JSON with a numeric {SCORE_FIELD!r}: {answer.text[:300]}",
            EXIT_GRADER,
        ) from None
    if expect_correct and (result.get("status") != "correct" or not 0.0 < score <= 1.0):
        raise HostedError(
            f"grader self-check: the reference solution of {item.get('problem_id')} was graded "
            f"{result.get('status')} with reward {score} (expected correct, 0 < reward <= 1): the "
            "evaluation behind the URL is broken or misconfigured",
            EXIT_GRADER,
        )
    if not expect_correct and (result.get("status") != "compile_error" or score != 0.0):
        raise HostedError(
            f"grader self-check: an answer without ModelNew for {item.get('problem_id')} was graded "
            f"{result.get('status')} with reward {score} (expected compile_error, 0)",
            EXIT_GRADER,
        )
    return result
