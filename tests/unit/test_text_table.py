"""The command line's table printer (groups.text.text_table)."""

from groups.text import text_table


def test_it_pads_each_column_to_its_widest_cell_and_trims_line_ends():
    lines = text_table(("TOPIC", "PARTITION", "NOTE"), [("orders", 0, "-"), ("a", 12, "")])
    assert lines == [
        "TOPIC   PARTITION  NOTE",
        "orders  0          -",
        "a       12",
    ]


def test_it_prints_only_the_header_without_rows():
    assert text_table(("A", "BB"), []) == ["A  BB"]


def test_it_writes_none_and_numbers_as_text():
    assert text_table(("X",), [(None,), (-3,)]) == ["X", "None", "-3"]
