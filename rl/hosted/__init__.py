"""Hosted policies: OpenAI reinforcement fine-tuning (RFT) of an API model, graded by KernelRL.

The weights of a hosted model are OpenAI's, so only OpenAI's RFT can train them: the policy samples on OpenAI's
side and KernelRL's evaluation service (`POST /reward`), exposed at a public URL, grades each sample.
`driver.run_hosted` is the entry: refusals first, then upload (dataset.py), create the job with the grader
(grader.py, api.py), monitor it (monitor.py, metrics.py), register the result (registry.py).

Nothing here has been run against the real OpenAI API; tests run it against a local server speaking the same
REST schema (tests/servers/fine_tuning.py). Each module's part: docs/hosted.md."""
