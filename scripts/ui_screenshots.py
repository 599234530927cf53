"""Refreshes the inspector's screenshots in docs/img/: seeds a temporary database with
the tests' data, starts ``erstwhile serve`` on it, and walks every view in Debian's
headless Chromium (the same walk tests/ui/test_inspector.py makes).

    python scripts/ui_screenshots.py [OUT_DIR]       default: docs/img
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.server.harness import start_server, write_config  # noqa: E402
from tests.ui.browser import MISSING, chromium  # noqa: E402
from tests.ui.conftest import EXTRACTION  # noqa: E402
from tests.ui.seed import seed  # noqa: E402
from tests.ui.tour import screenshots  # noqa: E402


def main() -> None:
    if MISSING:
        sys.exit(MISSING)
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "img"
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "inspector.db"
        seeded = seed(db)
        server = start_server(db, write_config(Path(tmp) / "erstwhile.toml", extra=EXTRACTION))
        driver = chromium()
        try:
            secret = server.token(read_only=True, name="screenshots")[1]
            for path in screenshots(driver, server.url, secret, seeded, out):
                print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        finally:
            driver.quit()
            server.stop()


if __name__ == "__main__":
    main()
