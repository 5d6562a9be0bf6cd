"""``verify --json``, ``--junit`` and ``--vsa`` carry what the change changed (issue 37,
item 3): the same figures ``pr`` prints, read from the verified bundle
(:mod:`harness.ci.changes`)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests/assets/tamper/good"
KEYS = ROOT / "tests/assets/keys"


def test_json_junit_and_vsa_carry_the_changes(tmp_path, capsys):
    key = tmp_path / "vsa.key"
    shutil.copyfile(KEYS / "test-only-signing.key", key)
    key.chmod(0o600)
    code = main(["verify", str(GOOD), "--pubkey", str(KEYS / "test-only-signing.pub"),
                 "--json", "--junit", str(tmp_path / "j.xml"), "--vsa",
                 str(tmp_path / "v.json"), "--vsa-key", str(key), "--workers", "1"])
    assert code in (0, 1)
    changes = json.loads(capsys.readouterr().out)["changes"]
    rows = json.loads((GOOD / "receipt.json").read_bytes())["predicate"]["rows"]
    assert changes["rows"] == len(rows) and changes["report"] == "report.md"
    assert 0 <= changes["rows_changed_base_right"] <= changes["rows_changed"] <= len(rows)
    assert len(changes["broken"]) == sum(1 for r in rows if r["stops"])
    properties = {p.get("name"): p.get("value")
                  for p in ET.parse(tmp_path / "j.xml").iter("property")}
    assert properties["rows_changed"] == str(changes["rows_changed"])
    assert properties["rows_changed_base_right"] == str(changes["rows_changed_base_right"])
    envelope = json.loads((tmp_path / "v.json").read_bytes())
    import base64

    statement = json.loads(base64.b64decode(envelope["payload"]))
    assert statement["subject"][0]["annotations"]["changes"] == changes
