"""Writes the JVM class archive of a Spark driver's start before the test suite runs (``make test`` calls it).

The suite's crash tests start dozens of Spark drivers in processes of their own; a driver whose JVM maps the archive
(:func:`kinesis_spout.testing.spark.quick_start_env`) starts in about half the time. Writing the archive costs about
one driver start, once per Spark installation and Java: done here, before pytest, every driver of the run gets it
(the suite's own background build, for runs that do not go through ``make test``, then finds it written).

Usage: ``python scripts/spark_class_archive.py`` (prints where the archive is; exit code 0 even when it cannot be
written: the drivers then start as before).
"""

from __future__ import annotations

import os
import sys

from kinesis_spout.testing.spark import build_class_archive, class_archive, spark_home_without_pyspark_zip


def main() -> int:
    env = dict(os.environ)
    if "SPARK_HOME" not in env:  # the same SPARK_HOME as the suite's (tests/conftest.py)
        home = spark_home_without_pyspark_zip()
        if home is None:
            print("[spark-archive] PySpark is not installed: nothing to write", flush=True)
            return 0
        env["SPARK_HOME"] = home
    target = class_archive(env)
    build = build_class_archive(env)
    if build is not None:
        print("[spark-archive] writing the class archive of a Spark driver's start (once per installation) ...",
              flush=True)
        build.wait()
    print(f"[spark-archive] {'present' if target.exists() else 'not written (drivers start without it)'}: {target}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
