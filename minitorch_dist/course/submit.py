"""Make the zip a student uploads to Gradescope, in the student edition:

    python -m minitorch_dist.submit            # writes submission_lab05.zip here, prints its path

The zip holds exactly the files that ``submission.json`` (written by the release) lists: the
package files with the assignment's tasks, at their paths in the edition. The autograder
(minitorch_dist/course/autograder.py) copies only those files over the course's tree, so nothing else
a student has changed (tests, conftest, notebooks) is sent or graded.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

from .edition import read_manifest

__all__ = ["make_submission"]


def make_submission(edition: str | Path = ".", out: str | Path | None = None) -> Path:
    """Zip the manifest's files of the edition at ``edition``; return the zip's path."""
    edition = Path(edition).resolve()
    manifest = read_manifest(edition)
    missing = [rel for rel in manifest["files"] if not (edition / rel).is_file()]
    if missing:
        raise FileNotFoundError(f"the edition lacks {missing}: restore them (git checkout)")
    path = Path(out) if out else edition / f"submission_{'_'.join(manifest['labs'])}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for rel in manifest["files"]:
            z.write(edition / rel, rel)
    return path.resolve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edition", default=".", help="the student edition (default: here)")
    parser.add_argument("--out", help="where to write the zip (default: in the edition)")
    args = parser.parse_args(argv)
    try:
        path = make_submission(args.edition, args.out)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    manifest = read_manifest(args.edition)
    print(f"{len(manifest['files'])} file(s) for {', '.join(manifest['labs'])}:")
    for rel in manifest["files"]:
        print(f"  {rel}")
    print("upload this zip to Gradescope (in Colab: Files pane, right click, Download):")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
