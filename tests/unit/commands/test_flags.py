"""Shared flags mean the same on every verb: one metavar per flag, and accepted after the
verb and after an action (``sources fetch --cache DIR`` as ``run --cache DIR``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.cli import build_parser, main

SHARED = ("--cache", "--workers", "--json", "--sources", "--patch", "--pubkey")


def _parsers(parser: argparse.ArgumentParser, name: str = "topp-gate"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for verb, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {verb}")


def test_every_shared_flag_has_one_metavar_across_verbs():
    seen: dict[str, set] = {flag: set() for flag in SHARED}
    users: dict[str, list[str]] = {flag: [] for flag in SHARED}
    for name, parser in _parsers(build_parser()):
        for action in parser._actions:
            for flag in set(action.option_strings) & set(SHARED):
                seen[flag].add(action.metavar)
                users[flag].append(name)
    for flag in SHARED:
        assert len(seen[flag]) == 1, (flag, seen[flag], users[flag])
    assert len(users["--cache"]) >= 7  # run, kernels, manifest new, sources and its actions


def test_cache_is_accepted_after_the_action_and_after_the_verb(tmp_path, capsys):
    cache = tmp_path / "cache"
    parser = build_parser()
    after_action = parser.parse_args(["sources", "show", "--cache", str(cache)])
    after_verb = parser.parse_args(["sources", "--cache", str(cache), "show"])
    neither = parser.parse_args(["sources", "show"])
    assert after_action.cache == after_verb.cache == Path(cache)
    assert neither.cache is None
    assert main(["sources", "show", "--cache", str(cache), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    # read from the empty cache given after the action, not the default cache
    assert all(side["tree"] is None and "not fetched" in side["tree_error"]
               for side in shown["sides"])
