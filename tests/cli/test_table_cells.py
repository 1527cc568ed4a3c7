"""Plain-text table cells (specplan/cli/output.py): what a user reads in every command's tables."""

from specplan.cli.output import table


def test_cells_read_as_numbers_a_user_expects():
    """None is '-' (adaptive printed Python's None), a 155-second TTFT in ms is 155000 (it printed 1.55e+05), tiny
    and astronomically large values keep three significant digits, others up to three decimals."""
    t = table([[None, 155000.4, 12.3456, 1e-4, 1.2e13, 0.0, 3]], ["a", "b", "c", "d", "e", "f", "g"])
    assert t.splitlines()[2].split() == ["-", "155000", "12.346", "0.0001", "1.2e+13", "0", "3"]
