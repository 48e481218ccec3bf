"""Print every prediction and summary row of a snapshot run (scripts/snapshot_run.sh) as JSON.

Everything a record holds is kept but the wall-clock seconds, so two snapshots
differ exactly where behaviour did.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path


def main(folder: str) -> None:
    rows = {}
    for path in sorted(Path(folder).glob("*/predictions.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                key = [record.pop(k) for k in ("task", "model", "strategy", "instance", "setting")]
                for name in ("prepare_cost", "generation_cost", "cost"):
                    if isinstance(record.get(name), dict):
                        record[name].pop("seconds", None)
                rows[f"{path.parent.name} {json.dumps(key)}"] = record
    for path in sorted(Path(folder).glob("*/summary.json")):
        summary = json.loads(path.read_text(encoding="utf-8"))
        for section in summary["sections"]:
            for row in section.get("rows", []):
                for name in [k for k in row if "seconds" in k]:
                    del row[name]
        # the recorded command is left out: the refactor made it complete on purpose
        rows[f"{path.parent.name} summary"] = summary["sections"]
    json.dump(rows, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
