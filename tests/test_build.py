from click.testing import CliRunner

from framework.cli import main


def test_version_reports_the_compiled_c_layer():
    result = CliRunner().invoke(main, ["version"])
    assert result.exit_code == 0, result.output
    assert "C layer" in result.output
