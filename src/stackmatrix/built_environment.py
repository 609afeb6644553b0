"""The built environment: what a backend hands to the later phases, saved in build.json
(`data.environment`) so that the check and the bench read it from the results
directory instead of asking the backend again. On the shared floor, beside the records:
the check, the bench and the pipeline read it without importing the build phase."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from stackmatrix.jsontypes import JSONObject


@dataclass(frozen=True, kw_only=True)
class Environment:
    backend: str
    # argv prefix that runs the environment's interpreter from this host, e.g.
    # ["/work/envs/cu128-1a2b/bin/python"] or ["docker", "run", "--rm", IMAGE, "python3"].
    python: tuple[str, ...]
    # host path of sys.prefix (None when the environment lives in an image)
    prefix: Path | None = None
    # host paths of the site-packages directories to scan statically
    site_packages: tuple[Path, ...] = ()
    # host path of the filesystem root whose system libraries the loader would see
    # ("/" for venv/current; an exported image rootfs for docker)
    root: Path = Path("/")
    image: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        return {
            "backend": self.backend,
            "python": list(self.python),
            "prefix": str(self.prefix) if self.prefix else None,
            "site_packages": [str(p) for p in self.site_packages],
            "root": str(self.root),
            "image": self.image,
            "env": dict(self.env),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> Environment:
        """What to_dict wrote (build.json's `data.environment`, read loosely)."""
        backend, python = str(raw["backend"]), raw["python"]
        prefix, site_packages, root = raw.get("prefix"), raw.get("site_packages"), raw.get("root")
        image, env = raw.get("image"), raw.get("env")
        return cls(
            backend=backend,
            python=tuple(str(a) for a in python) if isinstance(python, list | tuple) else (),
            prefix=Path(prefix) if isinstance(prefix, str) and prefix else None,
            site_packages=tuple(
                Path(str(p))
                for p in (site_packages if isinstance(site_packages, list | tuple) else ())
            ),
            root=Path(root) if isinstance(root, str) and root else Path("/"),
            image=image if isinstance(image, str) else None,
            env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
        )
