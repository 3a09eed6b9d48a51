"""``raptorx jar`` and ``raptorx --version``: the native jar, where it is and how to start
Spark with it, and the versions of the package, its jar and pyspark."""

from __future__ import annotations

import argparse

from raptorx_py.cli.common import command
from raptorx_py.errors import RaptorxError


def add_parser(sub) -> None:
    """``raptorx jar``."""
    text = (
        "print the native jar's path and the flags that start pyspark or spark-submit with "
        "it (--jars and --driver-class-path)"
    )
    with command(sub, "jar", cmd_jar, text, described=True, common=False) as cmd:
        only = cmd.add_mutually_exclusive_group()
        only.add_argument("--path", action="store_true", help="print the jar's path only")
        only.add_argument(
            "--flags", action="store_true", help="print the --jars/--driver-class-path line only"
        )


def cmd_jar(args) -> int:
    from raptorx_py import native
    from raptorx_py.errors import NativeJarError

    jar = native.jar_path()
    if jar is None:
        looked = ", ".join(str(p) for p in native.jar_candidates())
        raise NativeJarError(f"no raptorx jar at {looked}: {native.BUILD_HINT}")
    if not args.flags:
        print(jar)
    if not args.path:
        print(native.submit_flags(jar))
    return 0


class VersionAction(argparse.Action):
    """``--version``: ``version_text()``, computed only when asked."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())  # to stdout, as argparse's own version action does
        parser.exit()


def version_text() -> str:
    """The package's version, then the jar ``tiered_session()`` would use (its version, build
    identity, the pyspark it was compiled against, its path), then the installed pyspark."""
    from importlib.metadata import PackageNotFoundError, version

    from raptorx_py import native

    lines = [f"raptorx {package_version()}"]
    jar = native.jar_path()
    if jar is None:
        looked = ", ".join(str(p) for p in native.jar_candidates())
        lines.append(f"jar: none found (looked at {looked}); tiered_hive reads without pushdown")
    else:
        try:
            info = native.jar_info(jar)
            lines.append(
                f"jar {info.version} (build {info.build_id}, built against pyspark "
                f"{info.pyspark_version}): {jar}"
            )
        except RaptorxError as e:
            lines.append(f"jar: {e}")
    try:
        lines.append(f"pyspark {version('pyspark')} installed")
    except PackageNotFoundError:
        lines.append("pyspark: not installed")
    return "\n".join(lines)


def package_version() -> str:
    """raptorx_py's installed version (``raptorx --version``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("raptorx_py")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"
