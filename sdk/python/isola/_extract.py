# SPDX-License-Identifier: Apache-2.0
"""_extract: download_dir's extraction of an untrusted tar into a fresh temporary directory,
merged into the destination only once the whole archive was read.

The archive comes from isolad relaying a sandbox; a hostile or impersonated daemon can send
anything. Every entry is created below a directory made for this download (mkdtemp), parents
are opened one component at a time with O_NOFOLLOW (a symlink in the archive is never
traversed), leaves with O_EXCL|O_NOFOLLOW; hard links only to regular files this extraction
wrote, their data never written; devices and fifos skipped; owners and setuid bits dropped. So
no entry reaches a file that existed before (hard link `out/x` -> `victim.txt`, a symlink then
a file through it, a planted `x.isola-tmp` symlink). The merge moves entries with rename, which
replaces a link in the way instead of writing through it."""
import errno
import os
import shutil
import stat
import tarfile
from typing import List, Optional

from . import errors

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _refuse(name: str, why: str) -> errors.ProtocolError:
    return errors.ProtocolError(f"archive entry `{name}`: {why}", "forbidden")


def _parts(name: str) -> Optional[List[str]]:
    """Normalised components, or None for an absolute name or one with `..`."""
    if name.startswith("/"):
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    return None if ".." in parts else parts


def _open_dir(root_fd: int, comps: List[str], create: bool, name: str) -> int:
    """The directory comps below root_fd, walked without following symlinks."""
    fd = os.dup(root_fd)
    try:
        for c in comps:
            try:
                nfd = os.open(c, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise _refuse(name, "its directory is not part of this archive")
                os.mkdir(c, 0o755, dir_fd=fd)
                nfd = os.open(c, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refuse(name, "its parent is not a directory of this archive")
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _write_file(tar: tarfile.TarFile, m: tarfile.TarInfo, pfd: int, leaf: str) -> None:
    fd = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600, dir_fd=pfd)
    with os.fdopen(fd, "wb") as f:
        src = tar.extractfile(m)
        while src is not None:
            b = src.read(1 << 20)
            if not b:
                break
            f.write(b)
        os.fchmod(f.fileno(), m.mode & 0o777)
        os.utime(f.fileno(), (m.mtime, m.mtime))


def extract(tar: tarfile.TarFile, root: str) -> List[str]:
    """Extracts a tar whose single top entry is the downloaded directory into root (a fresh
    directory): the top entry's contents land directly in root. Returns the names extracted
    (relative to root). Raises ProtocolError for a hostile entry; root is then half-filled
    and the caller removes it."""
    done: List[str] = []
    top = None
    dirmodes = []
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        for m in tar:
            parts = _parts(m.name)
            if parts is None:
                raise _refuse(m.name, "absolute name or `..`: it would land outside the "
                                      "destination")
            if not parts:
                continue
            if top is None:
                top = parts[0]
            elif parts[0] != top:
                raise _refuse(m.name, "not under the archive's top entry")
            rel = parts[1:]
            if not rel:
                continue
            if not (m.isdir() or m.isfile() or m.issym() or m.islnk()):
                continue  # devices, fifos: never created
            pfd = _open_dir(root_fd, rel[:-1], True, m.name)
            leaf = rel[-1]
            try:
                try:
                    st = os.lstat(leaf, dir_fd=pfd)
                except FileNotFoundError:
                    st = None
                if st is not None and not (stat.S_ISDIR(st.st_mode) and m.isdir()):
                    # a second entry of the same name (both this archive's) replaces it
                    if stat.S_ISDIR(st.st_mode):
                        shutil.rmtree(os.path.join(root, *rel))
                    else:
                        os.unlink(leaf, dir_fd=pfd)
                if m.isdir():
                    if st is None or not stat.S_ISDIR(st.st_mode):
                        os.mkdir(leaf, 0o700, dir_fd=pfd)
                    dfd = os.open(leaf, _DIR_FLAGS, dir_fd=pfd)
                    os.fchmod(dfd, (m.mode & 0o777) | 0o700)
                    os.close(dfd)
                    if m.mode & 0o700 != 0o700:
                        dirmodes.append((os.path.join(*rel), m.mode & 0o777))
                elif m.isfile():
                    _write_file(tar, m, pfd, leaf)
                elif m.issym():
                    os.symlink(m.linkname, leaf, dir_fd=pfd)
                else:
                    tparts = _parts(m.linkname)
                    if not tparts or tparts[0] != top or len(tparts) < 2:
                        raise _refuse(m.name, "hard link target outside the archive")
                    tfd = _open_dir(root_fd, tparts[1:-1], False, m.name)
                    try:
                        try:
                            tst = os.lstat(tparts[-1], dir_fd=tfd)
                        except FileNotFoundError:
                            tst = None
                        if tst is None or not stat.S_ISREG(tst.st_mode):
                            raise _refuse(m.name, "hard link target is not a file "
                                                  "extracted before it")
                        os.link(tparts[-1], leaf, src_dir_fd=tfd, dst_dir_fd=pfd,
                                follow_symlinks=False)
                    finally:
                        os.close(tfd)
            finally:
                os.close(pfd)
            done.append("/".join(rel))
    finally:
        os.close(root_fd)
    return done, dirmodes


def merge(src: str, dst: str) -> None:
    """Moves every entry of src into the directory dst: new names by rename, directories
    merged, other existing entries replaced (rename: a symlink in the way is replaced, never
    followed). A directory in the way of a non-directory is an error."""
    for de in os.scandir(src):
        s, d = de.path, os.path.join(dst, de.name)
        try:
            dst_st = os.lstat(d)
        except FileNotFoundError:
            os.rename(s, d)
            continue
        src_dir = de.is_dir(follow_symlinks=False)
        if stat.S_ISDIR(dst_st.st_mode):
            if not src_dir:
                raise errors.ConflictError(f"cannot replace directory `{d}` with a file",
                                           "conflict")
            merge(s, d)
            continue
        if src_dir:
            os.unlink(d)
        os.replace(s, d)


def fix_dir_modes(dst: str, dirmodes) -> None:
    """Applies the archive's modes to directories that lacked u+rwx (deepest first)."""
    for rel, mode in reversed(dirmodes):
        p = os.path.join(dst, rel)
        if os.path.isdir(p) and not os.path.islink(p):
            os.chmod(p, mode)
