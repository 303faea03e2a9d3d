"""Unmodified programs (cp, mv, rm, dd, tar, rsync, find ...) on a real mount."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.gateway.fuse_mount.conftest import MountProcess

MiB = 1024 * 1024


def run(*argv: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], check=False, capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def ok(*argv: str | Path, cwd: Path | None = None) -> str:
    result = run(*argv, cwd=cwd)
    assert result.returncode == 0, (argv, result.stderr, result.stdout)
    return result.stdout


def s3_bytes(s3, bucket: str, key: str) -> bytes:  # type: ignore[no-untyped-def]
    return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())


def keys(s3, bucket: str, prefix: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]


def test_cp_small_file_and_cat(mounted: MountProcess, s3, tmp_path: Path) -> None:
    src = tmp_path / "hello.txt"
    src.write_bytes(b"hello, squall\n")
    ok("cp", src, mounted.path / "hello.txt")
    assert ok("cat", mounted.path / "hello.txt") == "hello, squall\n"
    assert s3_bytes(s3, mounted.bucket, "hello.txt") == b"hello, squall\n"
    assert "-" not in s3.head_object(Bucket=mounted.bucket, Key="hello.txt")["ETag"]


def test_cp_large_file_streams_as_multipart(mounted: MountProcess, s3, tmp_path: Path) -> None:
    data = os.urandom(40 * MiB)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    ok("cp", src, mounted.path / "big.bin")
    head = s3.head_object(Bucket=mounted.bucket, Key="big.bin")
    assert head["ETag"].strip('"').endswith("-5")  # 8 MiB blocks: 4 full parts + the tail
    assert head["ContentLength"] == len(data)
    digest = hashlib.sha256(data).hexdigest()
    assert hashlib.sha256(s3_bytes(s3, mounted.bucket, "big.bin")).hexdigest() == digest
    copy = tmp_path / "back.bin"  # sequential read back through the read-ahead
    ok("cp", mounted.path / "big.bin", copy)
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == digest


def test_mv_and_rm(mounted: MountProcess, s3) -> None:
    (mounted.path / "before.txt").write_text("moving")
    ok("mv", mounted.path / "before.txt", mounted.path / "after.txt")
    assert keys(s3, mounted.bucket, "before") == []
    assert s3_bytes(s3, mounted.bucket, "after.txt") == b"moving"
    ok("rm", mounted.path / "after.txt")
    assert keys(s3, mounted.bucket, "after") == []
    assert not (mounted.path / "after.txt").exists()


def test_mv_no_clobber_keeps_the_target(mounted: MountProcess, s3) -> None:
    (mounted.path / "keep-a").write_text("a")
    (mounted.path / "keep-b").write_text("b")
    run("mv", "-n", mounted.path / "keep-a", mounted.path / "keep-b")
    assert s3_bytes(s3, mounted.bucket, "keep-b") == b"b"
    assert (mounted.path / "keep-a").read_text() == "a"


def test_mkdir_rmdir_and_enotempty(mounted: MountProcess, s3) -> None:
    d = mounted.path / "dir1"
    ok("mkdir", d)
    assert keys(s3, mounted.bucket, "dir1/") == ["dir1/"]
    ok("touch", d / "f")
    result = run("rmdir", d)
    assert result.returncode != 0 and "Directory not empty" in result.stderr
    with pytest.raises(OSError) as info:
        os.rmdir(d)
    assert info.value.errno == errno.ENOTEMPTY
    ok("rm", d / "f")
    ok("rmdir", d)
    assert keys(s3, mounted.bucket, "dir1") == []
    with pytest.raises(FileExistsError):
        os.mkdir(mounted.path)


def test_ls_stat_find(mounted: MountProcess, s3) -> None:
    s3.put_object(Bucket=mounted.bucket, Key="tree/a.txt", Body=b"a" * 10)
    s3.put_object(Bucket=mounted.bucket, Key="tree/sub/b.txt", Body=b"b" * 20)
    (mounted.path / "tree" / "c.txt").write_bytes(b"c")  # implicit directory from S3 keys
    assert ok("ls", mounted.path / "tree").split() == ["a.txt", "c.txt", "sub"]
    assert ok("stat", "-c", "%s %F", mounted.path / "tree/sub/b.txt").strip() == \
        "20 regular file"
    assert ok("stat", "-c", "%F", mounted.path / "tree/sub").strip() == "directory"
    found = sorted(ok("find", ".", cwd=mounted.path / "tree").split())
    assert found == [".", "./a.txt", "./c.txt", "./sub", "./sub/b.txt"]


def test_dd_block_sizes(mounted: MountProcess, s3, tmp_path: Path) -> None:
    src = tmp_path / "dd.src"
    src.write_bytes(os.urandom(12 * MiB))
    ok("dd", f"if={src}", f"of={mounted.path / 'dd1M'}", "bs=1M")
    ok("dd", f"if={src}", f"of={mounted.path / 'dd4k'}", "bs=4k", "count=1024")
    assert s3_bytes(s3, mounted.bucket, "dd1M") == src.read_bytes()
    assert s3_bytes(s3, mounted.bucket, "dd4k") == src.read_bytes()[:4 * MiB]
    out = tmp_path / "dd.out"
    ok("dd", f"if={mounted.path / 'dd1M'}", f"of={out}", "bs=4k")
    assert out.read_bytes() == src.read_bytes()


def _tree(root: Path) -> None:
    (root / "x" / "y").mkdir(parents=True)
    (root / "top.txt").write_text("top")
    (root / "x" / "data.bin").write_bytes(os.urandom(3 * MiB + 7))
    (root / "x" / "y" / "empty").write_bytes(b"")


def test_tar_create_and_extract(mounted: MountProcess, tmp_path: Path) -> None:
    src = tmp_path / "src"
    _tree(src)
    ok("tar", "cf", tmp_path / "a.tar", "-C", src, ".")
    (mounted.path / "untar").mkdir()
    ok("tar", "xf", tmp_path / "a.tar", "-C", mounted.path / "untar")
    ok("diff", "-r", src, mounted.path / "untar")
    ok("tar", "cf", mounted.path / "b.tar", "-C", mounted.path / "untar", ".")  # archive into
    (tmp_path / "back").mkdir()
    ok("tar", "xf", mounted.path / "b.tar", "-C", tmp_path / "back")
    ok("diff", "-r", src, tmp_path / "back")


@pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed")
def test_rsync(mounted: MountProcess, tmp_path: Path) -> None:
    src = tmp_path / "src"
    _tree(src)
    ok("rsync", "-r", f"{src}/", f"{mounted.path / 'rsynced'}/")
    ok("diff", "-r", src, mounted.path / "rsynced")


def test_rename_directory_moves_every_key(mounted: MountProcess, s3) -> None:
    for key in ("old/a", "old/b/c", "old/b/d"):
        s3.put_object(Bucket=mounted.bucket, Key=key, Body=key.encode())
    ok("mv", mounted.path / "old", mounted.path / "new")
    assert keys(s3, mounted.bucket, "old") == []
    # the renamed directory gets a marker so that it stays visible when emptied
    assert sorted(keys(s3, mounted.bucket, "new/")) == ["new/", "new/a", "new/b/c", "new/b/d"]
    assert s3_bytes(s3, mounted.bucket, "new/b/c") == b"old/b/c"


def test_append_with_shell_redirection(mounted: MountProcess, s3) -> None:
    s3.put_object(Bucket=mounted.bucket, Key="log.txt", Body=b"line1\n")
    ok("sh", "-c", f"echo line2 >> {mounted.path / 'log.txt'}")
    ok("sh", "-c", f"echo line3 >> {mounted.path / 'log.txt'}")
    assert s3_bytes(s3, mounted.bucket, "log.txt") == b"line1\nline2\nline3\n"


def test_append_to_big_object_copies_it_server_side(mounted: MountProcess, s3) -> None:
    data = os.urandom(9 * MiB)
    s3.put_object(Bucket=mounted.bucket, Key="big-append", Body=data)
    with open(mounted.path / "big-append", "ab") as f:
        f.write(b"tail")
    assert s3_bytes(s3, mounted.bucket, "big-append") == data + b"tail"


def test_random_write_in_existing_file(mounted: MountProcess, s3) -> None:
    data = bytearray(os.urandom(10 * MiB))
    s3.put_object(Bucket=mounted.bucket, Key="random.bin", Body=bytes(data))
    fd = os.open(mounted.path / "random.bin", os.O_WRONLY)
    try:
        os.pwrite(fd, b"X" * 100, 5 * MiB)
        os.pwrite(fd, b"Y" * 10, 10)
    finally:
        os.close(fd)
    data[5 * MiB:5 * MiB + 100] = b"X" * 100
    data[10:20] = b"Y" * 10
    assert s3_bytes(s3, mounted.bucket, "random.bin") == bytes(data)
    assert (mounted.path / "random.bin").read_bytes() == bytes(data)


def test_write_then_rewrite_start_of_streamed_file(mounted: MountProcess, s3) -> None:
    data = bytearray(os.urandom(17 * MiB))
    with open(mounted.path / "rewind.bin", "wb") as f:
        f.write(data)  # two parts already streamed
        f.seek(0)
        f.write(b"HEADER")
        data[:6] = b"HEADER"
        f.seek(0)
    assert s3_bytes(s3, mounted.bucket, "rewind.bin") == bytes(data)


def test_truncate(mounted: MountProcess, s3) -> None:
    s3.put_object(Bucket=mounted.bucket, Key="trunc.txt", Body=b"0123456789")
    ok("truncate", "-s", "4", mounted.path / "trunc.txt")
    assert s3_bytes(s3, mounted.bucket, "trunc.txt") == b"0123"
    ok("truncate", "-s", "6", mounted.path / "trunc.txt")
    assert s3_bytes(s3, mounted.bucket, "trunc.txt") == b"0123\0\0"
    with open(mounted.path / "trunc.txt", "r+b") as f:
        f.truncate(0)
        f.write(b"new")
    assert s3_bytes(s3, mounted.bucket, "trunc.txt") == b"new"


def test_fsync_makes_data_visible_before_close(mounted: MountProcess, s3) -> None:
    first, second = os.urandom(9 * MiB + 5), os.urandom(MiB)
    with open(mounted.path / "synced.bin", "wb") as f:
        f.write(first)
        f.flush()
        os.fsync(f.fileno())
        assert s3_bytes(s3, mounted.bucket, "synced.bin") == first
        f.write(second)
        f.flush()
        os.fsync(f.fileno())
        assert s3_bytes(s3, mounted.bucket, "synced.bin") == first + second
        f.write(b"end")
    assert s3_bytes(s3, mounted.bucket, "synced.bin") == first + second + b"end"


def test_file_open_for_writing_reads_back_local_state(mounted: MountProcess) -> None:
    with open(mounted.path / "rw.bin", "w+b") as f:
        f.write(b"abc" * 1000)
        f.flush()
        assert os.stat(mounted.path / "rw.bin").st_size == 3000
        assert (mounted.path / "rw.bin").read_bytes() == b"abc" * 1000
        f.seek(0)
        assert f.read(3) == b"abc"


def test_object_replaced_while_open_reads_as_estale(mounted: MountProcess, s3) -> None:
    s3.put_object(Bucket=mounted.bucket, Key="pinned.bin", Body=b"1" * 20 * MiB)
    fd = os.open(mounted.path / "pinned.bin", os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 15 * MiB) == b"1" * 4096
        s3.put_object(Bucket=mounted.bucket, Key="pinned.bin", Body=b"2" * 20 * MiB)
        with pytest.raises(OSError) as info:  # a block not fetched before the change
            os.pread(fd, 4096, 2 * MiB)
        assert info.value.errno == errno.ESTALE
    finally:
        os.close(fd)


def test_missing_files_are_enoent(mounted: MountProcess) -> None:
    result = run("cat", mounted.path / "no-such-file")
    assert result.returncode != 0 and "No such file or directory" in result.stderr
    with pytest.raises(FileNotFoundError):
        os.stat(mounted.path / "no/such/dir")
    with pytest.raises(FileNotFoundError):
        os.unlink(mounted.path / "no-such-file")


def test_chmod_is_stored(mounted: MountProcess, s3) -> None:
    (mounted.path / "script.sh").write_text("#!/bin/sh\necho hi\n")
    ok("chmod", "755", mounted.path / "script.sh")
    assert oct(os.stat(mounted.path / "script.sh").st_mode & 0o777) == "0o755"
    assert s3.head_object(Bucket=mounted.bucket, Key="script.sh")["Metadata"]["mode"] == "755"
    assert ok(mounted.path / "script.sh") == "hi\n"


def test_statfs(mounted: MountProcess) -> None:
    st = os.statvfs(mounted.path)
    assert st.f_bavail > 0 and st.f_namemax == 1024


def test_creates_in_a_new_directory_and_names_created_elsewhere(mounted: MountProcess,
                                                                 s3) -> None:
    new = mounted.path / "fresh"
    new.mkdir()  # made here: lookups of missing names in it need no request
    for i in range(50):
        (new / f"f{i:02d}").write_bytes(b"%d" % i)
    assert sorted(os.listdir(new)) == [f"f{i:02d}" for i in range(50)]
    assert sorted(keys(s3, mounted.bucket, "fresh/")) == \
        ["fresh/"] + [f"fresh/f{i:02d}" for i in range(50)]
    # A directory that was not made here: what other clients create shows at once.
    s3.put_object(Bucket=mounted.bucket, Key="shared-dir/a", Body=b"a")
    (mounted.path / "shared-dir" / "b").write_bytes(b"b")
    s3.put_object(Bucket=mounted.bucket, Key="shared-dir/c", Body=b"c")
    assert (mounted.path / "shared-dir" / "c").read_bytes() == b"c"


def test_overwriting_keeps_mode(mounted: MountProcess, s3) -> None:
    path = mounted.path / "keep-mode.sh"
    path.write_text("one")
    os.chmod(path, 0o750)
    path.write_text("two")  # O_TRUNC
    assert oct(path.stat().st_mode & 0o777) == "0o750"
    assert s3.head_object(Bucket=mounted.bucket, Key="keep-mode.sh")["Metadata"]["mode"] == "750"
    assert s3_bytes(s3, mounted.bucket, "keep-mode.sh") == b"two"
