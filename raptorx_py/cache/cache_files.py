"""Files of the on-disk cache tiers (block cache, footer cache): who may read them, and the
per-cache secret their checksums are keyed with.

Cached bytes are copies of table files, which may be readable by their owner only, so a
cache is private by default: directories 0700 and files 0600, whatever the umask
(``cache.group-shared=true``: directories 2770, setgid so new files take the directory's
group, and files 0660, for a node whose processes run as several users of one group).

A checksum anyone can recompute detects torn writes, not a block rewritten on purpose, nor
a valid block copied under another block's name. So each cache directory holds a random
secret (``cache.secret``, 32 random bytes, created once, 0600 or 0660 as above) and an
entry's checksum is HMAC-SHA256 keyed with it (``keyed_mac``) over the entry's name (which
carries the key: the file's identity and the block index) and its bytes. Whoever cannot
read the secret cannot forge an entry. HMAC-SHA256 rather than a faster keyed hash because
the JVM verifies and writes these entries too (``javax.crypto.Mac``; the Scala side of the
block files is ``native/.../raptorx/cache/BlockFiles.scala``), and it must be the same
function in both languages. A JVM creates the secret by the same rule as ``load_secret``
(temp file, then a hard link: the first creator wins) when it is missing.

Limits: a process that can read the secret (the cache's own users) can forge entries; the
modes are set on what this code creates, and an existing directory is narrowed only when it
is ours (a shared directory someone else owns is left as it is).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import os
import secrets

SECRET_FILE = "cache.secret"
SECRET_BYTES = 32
#: Bytes of ``keyed_mac``.
MAC_BYTES = 32


def modes(group_shared: bool) -> tuple[int, int]:
    """``(directory mode, file mode)`` of a cache."""
    return (0o2770, 0o660) if group_shared else (0o700, 0o600)


def make_dirs(path: str, dir_mode: int) -> None:
    """``os.makedirs`` giving every directory it creates exactly ``dir_mode`` (the umask
    cannot widen or narrow it); the leaf, if it existed and is ours, is set to it too."""
    path = os.path.abspath(path)
    missing = []
    head = path
    while head and not os.path.isdir(head):
        missing.append(head)
        parent = os.path.dirname(head)
        if parent == head:
            break
        head = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, dir_mode)
        except FileExistsError:
            continue
        os.chmod(d, dir_mode)
    if not missing:
        try:
            st = os.stat(path)
            if st.st_uid == os.geteuid() and (st.st_mode & 0o7777) != dir_mode:
                os.chmod(path, dir_mode)
        except OSError:
            pass  # not ours to change: used as it is


def opener(file_mode: int):
    """An ``open(..., opener=)`` that creates files with exactly ``file_mode``."""

    def _open(path, flags):
        fd = os.open(path, flags, file_mode)
        try:
            os.fchmod(fd, file_mode)
        except OSError:
            pass  # an existing file of someone else's: its mode is its owner's
        return fd

    return _open


def touch(path: str, file_mode: int) -> None:
    """Create ``path`` (empty) with ``file_mode`` unless it exists; SQLite then gives its
    ``-wal`` and ``-shm`` files the database file's mode."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, file_mode)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, file_mode)
    finally:
        os.close(fd)


def load_secret(directory: str, file_mode: int) -> bytes:
    """The cache's secret in ``directory``, created (atomically: the first creator wins,
    every process then reads the same) if missing."""
    path = os.path.join(directory, SECRET_FILE)
    for _ in range(3):
        try:
            with open(path, "rb") as f:
                secret = f.read()
            if len(secret) == SECRET_BYTES:
                return secret
            # Torn or foreign: entries keyed with it cannot be trusted; start a new secret.
            os.unlink(path)
        except FileNotFoundError:
            pass
        tmp = f"{path}.{os.getpid()}.{secrets.token_hex(8)}"
        with open(tmp, "xb", opener=opener(file_mode)) as f:
            f.write(secrets.token_bytes(SECRET_BYTES))
        try:
            os.link(tmp, path)  # fails if another process published its secret first
        except FileExistsError:
            pass
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            try:  # no hard links here: O_EXCL publish of the same bytes
                with open(tmp, "rb") as src, open(path, "xb", opener=opener(file_mode)) as f:
                    f.write(src.read())
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
    raise OSError(f"cannot set up the cache secret {path}")


def remove_if_present(path: str) -> None:
    """Unlink ``path``; one already gone (another process removed it) is no error."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def keyed_mac(secret: bytes, name: bytes, payload) -> bytes:
    """HMAC-SHA256 keyed with ``secret`` over ``len(name)`` (u32, little-endian), ``name``
    and ``payload``: the checksum of every block and footer entry (32 bytes)."""
    h = hmac.new(secret, digestmod=hashlib.sha256)
    h.update(len(name).to_bytes(4, "little"))
    h.update(name)
    h.update(payload)
    return h.digest()
