"""AUTOREG_MODE as a user writes it (Options, "AUTOREG_MODE"): case and surrounding spaces do not
count; a value autoreg does not know fails the user's class statement with one line that names the
accepted values, and the traceback goes from that statement to the error without a chain through
autoreg's internals (the CLI's one-line form is tests/audit/test_cli_output.py's)."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

import autoreg
from autoreg._config import ENV_VAR, Mode, environment_mode

ACCEPTED = "Valid values: 'register', 'warn', 'strict'"
USER_CODE = "import autoreg\n\nclass Net(autoreg.Module):\n    pass\n"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("strict", Mode.STRICT, id="lower"),
        pytest.param("STRICT", Mode.STRICT, id="upper"),
        pytest.param(" strict", Mode.STRICT, id="leading-space"),
        pytest.param("Warn\n", Mode.WARN, id="title-and-newline"),
        pytest.param("\tRegister ", Mode.REGISTER, id="tab-and-space"),
        pytest.param("   ", None, id="only-spaces-is-unset"),
    ],
)
def test_case_and_surrounding_spaces_do_not_count(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: Mode | None
) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    assert environment_mode() is expected
    cls = type("Configured", (autoreg.Module,), {}, warn=True)
    assert cls.__autoreg__.mode is (expected or Mode.WARN)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("bogus", id="unknown"),
        pytest.param("st rict", id="inner-space"),
        pytest.param("strict!", id="punctuation"),
    ],
)
def test_a_bad_value_is_one_line_that_names_the_accepted_values(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    with pytest.raises(autoreg.ConfigurationError) as caught:

        class Net(autoreg.Module):
            pass

    message = str(caught.value)
    assert message.startswith(f"AUTOREG_MODE={value!r} is not a mode autoreg knows. {ACCEPTED}")
    assert "\n" not in message
    assert isinstance(caught.value, ValueError)


def test_the_traceback_goes_from_the_users_class_statement_to_the_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENV_VAR, "bogus")
    user_file = tmp_path / "user_model.py"
    user_file.write_text(USER_CODE)
    code = compile(USER_CODE, str(user_file), "exec")
    with pytest.raises(autoreg.ConfigurationError) as caught:
        exec(code, {"__name__": "user_model"})

    error = caught.value
    frames = traceback.extract_tb(error.__traceback__)
    first = next(i for i, frame in enumerate(frames) if frame.filename == str(user_file))
    user, *inside = frames[first:]
    assert (user.lineno, user.line) == (3, "class Net(autoreg.Module):")
    # The class statement enters autoreg once (the class's set-up, its record) and the error is
    # raised there: no frame of the record's construction or of the environment's parser.
    assert [frame.name for frame in inside] == ["__init_subclass__", "_set_up", "create_record"]
    assert all(Path(frame.filename).parent.name == "autoreg" for frame in inside)
    # No "During handling of the above exception" or "The above exception was the direct cause".
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__
    shown = "".join(traceback.format_exception(error))
    assert shown.count("Traceback (most recent call last)") == 1
    assert shown.splitlines()[-1].startswith("autoreg.ConfigurationError: AUTOREG_MODE='bogus'")
