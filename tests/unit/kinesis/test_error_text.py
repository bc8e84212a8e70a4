"""Error replies on one line: an HTML page becomes its status and title."""

from __future__ import annotations

from kinesis_spout.kinesis.error_text import MAX_MESSAGE_CHARS, error_message


def test_an_html_page_becomes_its_status_and_title() -> None:
    assert error_message("<!doctype html>\n<html><title>500 Internal Server Error</title><p>long</p>", 500) == \
        "500 Internal Server Error"
    assert error_message("<html><head><title>Bad\n Gateway</title></head></html>", 502) == "HTTP 502 Bad Gateway"
    assert error_message("<!DOCTYPE html><body>no title</body>", 503) == "HTTP 503"


def test_a_plain_message_keeps_its_words_on_one_line_and_is_cut() -> None:
    assert error_message("Stream sentences under account 1\n not found.", 400) == \
        "Stream sentences under account 1 not found."
    assert error_message("x" * 500, 400) == "x" * MAX_MESSAGE_CHARS + "..."
    assert error_message("<b>a reply that is not a page</b>", 400) == "<b>a reply that is not a page</b>"
