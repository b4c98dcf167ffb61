"""What Spark needs before its JVM starts, checked in one line each, and Spark's errors told in one line.

``check_java`` finds the Java Spark will run the way Spark finds it (``$JAVA_HOME/bin/java`` when
JAVA_HOME is set, else ``java`` on PATH) and wants 17 or newer; ``check_master`` wants a master URL Spark
accepts (``local``, ``local[N]``, ``local[*]``, ``local[N,F]``, ``spark://HOST:PORT[,HOST:PORT]``,
``k8s://URL``, ``yarn``) and, for ``spark://`` and ``k8s://``, one that accepts a TCP connection.
Each raises ``SparkUnavailable``, whose ``str()`` is the message for the user (exit status 2).
``spark_failure`` picks the root Java cause out of a py4j error.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from minibroker.analytics.inputs import display_name

#: the Java Spark 4 needs
JAVA_MAJOR = 17
JAVA_HINT = "install it (Debian: apt-get install openjdk-17-jre-headless) and check with `java -version`"
LOCAL = re.compile(r"^local(?:\[(\*|[1-9]\d*)(?:,([1-9]\d*))?\])?$")
LOCAL_CLUSTER = re.compile(r"^local-cluster\[\d+,\d+,\d+\]$")
STANDALONE = re.compile(r"^spark://([^,/:]+:\d+)(,[^,/:]+:\d+)*$")


class SparkUnavailable(Exception):
    """Spark cannot run as asked; ``str()`` is the one-line message for the user."""


# --- checks ----------------------------------------------------------------------------------------
def find_java() -> str:
    """The java binary Spark will run, or SparkUnavailable saying why there is none."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if not java.is_file():
            raise SparkUnavailable(
                f"Spark needs Java {JAVA_MAJOR} or newer, and JAVA_HOME={home} has no bin/java: "
                f"fix or unset JAVA_HOME, or {JAVA_HINT}"
            )
        return str(java)
    java = shutil.which("java")
    if java is None:
        raise SparkUnavailable(
            f"Spark needs Java {JAVA_MAJOR} or newer, and no `java` is on PATH (JAVA_HOME is not set): "
            f"{JAVA_HINT}"
        )
    return java


def _major(match: re.Match[str] | None) -> int | None:
    """The major version of a matched ``"17.0.15"`` (17) or ``"1.8.0_392"`` (8): groups 1 and 2."""
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) is not None else major


def java_major(version_text: str) -> int | None:
    """The major version in ``java -version`` output (``"17.0.15"`` → 17, ``"1.8.0_392"`` → 8)."""
    return _major(re.search(r'version "(\d+)(?:\.(\d+))?', version_text))


def release_major(java: str) -> int | None:
    """The major version in the ``release`` file of ``java``'s installation (None without one).

    Every JDK and JRE since 9 has it (``JAVA_VERSION="17.0.15"``); reading it spares
    starting a JVM just to ask ``java -version``.
    """
    release = Path(java).resolve().parent.parent / "release"
    try:
        text = release.read_text(errors="replace")
    except OSError:
        return None
    if not os.access(java, os.X_OK):
        return None
    return _major(re.search(r'^JAVA_VERSION="(\d+)(?:\.(\d+))?', text, re.MULTILINE))


def check_java() -> tuple[str, int]:
    """(java path, major version) of a usable Java, or SparkUnavailable."""
    java = find_java()
    major = release_major(java)
    if major is not None and major >= JAVA_MAJOR:
        return java, major
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SparkUnavailable(
            f"Spark needs Java {JAVA_MAJOR} or newer; {java} does not run ({error})"
        ) from None
    major = java_major(out.stderr + out.stdout)
    if out.returncode != 0 or major is None:
        raise SparkUnavailable(
            f"Spark needs Java {JAVA_MAJOR} or newer; `{java} -version` did not say which Java it is: "
            f"{JAVA_HINT}"
        )
    if major < JAVA_MAJOR:
        raise SparkUnavailable(
            f"Spark needs Java {JAVA_MAJOR} or newer; {java} is Java {major}: "
            f"{JAVA_HINT}, or point JAVA_HOME at a newer one"
        )
    return java, major


def is_local(master: str) -> bool:
    return bool(LOCAL.match(master) or LOCAL_CLUSTER.match(master))


def local_cores(master: str) -> int | None:
    """Executor threads of a ``local[...]`` master (None for other masters)."""
    match = LOCAL.match(master)
    if match is None:
        return None
    if match.group(1) is None:
        return 1
    if match.group(1) == "*":
        return os.cpu_count() or 1
    return int(match.group(1))


def master_addresses(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs to reach for ``master``; SparkUnavailable if it is no master URL."""
    if is_local(master) or master == "yarn":
        return []
    if STANDALONE.match(master):
        pairs = []
        for item in master[len("spark://") :].split(","):
            host, _, port = item.rpartition(":")
            pairs.append((host, int(port)))
        return pairs
    if master.startswith("k8s://"):
        url = urlparse(master[len("k8s://") :] if "://" in master[6:] else "https://" + master[6:])
        if url.hostname:
            return [(url.hostname, url.port or (443 if url.scheme == "https" else 80))]
    raise SparkUnavailable(
        f"--master {master!r}: expected local, local[N], local[*], spark://HOST:PORT, k8s://URL or yarn"
    )


def check_master(master: str, connect_timeout: float = 3.0) -> None:
    """SparkUnavailable unless ``master`` is well formed and (for spark://, k8s://) reachable."""
    addresses = master_addresses(master)
    problems = []
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=connect_timeout):
                return
        except OSError as error:
            problems.append(error.strerror or type(error).__name__.replace("Error", " error").lower())
    if addresses:
        raise SparkUnavailable(
            f"cannot reach the Spark master {master} ({'; '.join(dict.fromkeys(problems))}): "
            "start it, or run locally with --master 'local[*]'"
        )


_JAVA_EXCEPTION = re.compile(r"(?:^|: )((?:[a-z0-9_$]+\.)+[A-Z][A-Za-z0-9_$]*(?:Exception|Error): .*)")


def spark_failure(text: str) -> str:
    """The telling line of a Spark error: its root Java cause, not py4j's "error calling o138.collect"."""
    lines = [
        line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("at ")
    ]
    causes = [match.group(1) for line in lines if (match := _JAVA_EXCEPTION.search(line))]
    if not causes:
        return lines[0] if lines else "unknown error"
    where = re.search(r"(?:in|reading) file (\S+?)\.?(?:\s|$)", text)
    if where and where.group(1) not in causes[-1]:
        return f"{causes[-1]} (in file {display_name(where.group(1))})"
    return causes[-1]
