"""scripts/serve_env.py's argument checks (no server started)."""

import pytest

from scripts import serve_env


def test_a_port_outside_0_to_65535_is_a_usage_error(capsys):
    """asyncio binds port 99999 as 34463 (modulo 65536) while uvicorn logs 99999: refused before anything starts."""
    for bad in ("99999", "65536", "-1", "http"):
        with pytest.raises(SystemExit) as e:
            serve_env.parse_args(["--port", bad])
        assert e.value.code == 2
        assert "--port" in capsys.readouterr().err
    assert [serve_env.parse_args(["--port", p]).port for p in ("0", "8000", "65535")] == [0, 8000, 65535]
