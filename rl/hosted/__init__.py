"""Hosted policies: OpenAI reinforcement fine-tuning (RFT) of an API model, graded by KernelRL.

The weights of a hosted model (GPT-5, o4-mini) are OpenAI's, so only OpenAI's RFT can train them: the
policy samples on OpenAI's side and a grader scores each sample. Here the grader is KernelRL's evaluation
service (`POST /reward`), exposed at a public URL, with the run's evaluation pool behind it.

    config.py    HostedConfig (the `hosted:` section of conf/experiment/gpt5_triton.yaml)
    errors.py    HostedError with its exit code; every API refusal turned into one clear message
    dataset.py   problems -> the RFT JSONL (messages + problem_id + problem_sha256), train/validation split
    grader.py    the endpoint grader's JSON (request/response mapped onto /reward), URL checks, self-check
    service.py   the KernelRL service in this process, recording every verdict it returns
    api.py       the OpenAI files + fine_tuning calls we make (pinned SDK: openai 3.57)
    metrics.py   job events and our verdicts -> metrics.jsonl / W&B rows (the open loop's keys)
    monitor.py   poll a job: status, events, checkpoints; Ctrl-C asks before cancelling
    registry.py  the resulting model and checkpoints, and the scripts/benchmark.py command for them
    driver.py    `run_hosted`: refusals first, then upload, create (or resume a job id), monitor, register

Nothing here has been run against the real OpenAI API (these machines cannot reach it); tests run it against
a local server speaking the same REST schema (tests/servers/fine_tuning.py). docs/hosted.md says more.
"""
