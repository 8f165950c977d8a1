"""The files a shell command would write, read from its words and never run
(baton.skills.runtime.command_words.written_paths): what an agent's shell tool is checked
for before it runs, hostile commands included."""

import contextlib
import random
import time

import pytest

from baton.skills.runtime.command_words import LONGEST_READ, shell_tokens, written_paths

CWD = "/repo/sub"


@pytest.mark.parametrize("command, written", [
    ("echo hi > out.txt", ["out.txt"]),
    ("echo hi >out.txt; cat a >> log && b 2> err || c &> all; d 1>one 2>>two &>>three >| clobber",
     ["out.txt", "log", "err", "all", "one", "two", "three", "clobber"]),
    ("make 2>&1 >&2 >&- | tee -a build.log copy.log", ["build.log", "copy.log"]),
    ("echo x >&file", ["file"]),
    ("cat < in.txt <<< word 0<> both", ["both"]),
    ("sed -i 's/a/b/' f.py g.py", ["f.py", "g.py"]),
    ("sed -i.bak -e 's/a/b/' -e 's/c/d/' f.py", ["f.py"]),
    ("sed -Ei -es/a/b/ f.py", ["f.py"]),
    ("sed --in-place=.orig --expression=s/a/b/ f.py", ["f.py"]),
    ("sed -n 's/a/b/p' f.py", []),
    ("perl -pi -e 's/a/b/' f.pl", ["f.pl"]),
    ("perl -i.bak -p fix.pl f.pl", ["f.pl"]),
    ("perl -ne 'print' f.pl", []),
    ("mv old.py new.py", ["new.py", "old.py"]),
    ("mv a.py b.py pkg/", ["pkg/a.py", "pkg/b.py", "a.py", "b.py"]),
    ("cp -r src.py dst.py", ["dst.py"]),
    ("cp -t pkg a.py b.py", ["pkg/a.py", "pkg/b.py"]),
    ("cp --target-directory=pkg a.py", ["pkg/a.py"]),
    ("cp -T a.py b.py", ["b.py"]),
    ("install -m 644 tool /repo/bin/tool", ["/repo/bin/tool"]),
    ("install -d dir1 dir2", []),
    ("rm -rf build dist", ["build", "dist"]),
    ("rm -- -rf", ["-rf"]),
    ("touch -d yesterday -r ref.txt t.txt", ["t.txt"]),
    ("truncate -s 0 big.log", ["big.log"]),
    ("dd if=/dev/zero of=disk.img bs=1M count=1", ["disk.img"]),
    ("git checkout -- a.py b.py", ["a.py", "b.py"]),
    ("git checkout main -- a.py", ["a.py"]),
    ("git checkout -b feature", []),
    ("git restore --source=HEAD~1 -s HEAD r.py", ["r.py"]),
    ("git -C .. restore top.py", ["/repo/top.py"]),
    ("git status > status.txt", ["status.txt"]),
    ("FOO=1 sudo env BAR=2 nohup rm -f x.py", ["x.py"]),
    ("/bin/rm y.py", ["y.py"]),
    ("if true; then rm in_if.py; fi", ["in_if.py"]),
    ("(cd inner && rm z.py)", ["inner/z.py"]),
    ("cd /repo/docs\nrm a.md\necho done > b.md", ["/repo/docs/a.md", "/repo/docs/b.md"]),
    ("cd $SOMEWHERE && rm rel.py /repo/abs.py", ["/repo/abs.py"]),
    ("echo '#' > hash.txt # > not_this", ["hash.txt"]),
    ("# only a comment > no\nrm yes.py", ["yes.py"]),
    ("ls -la; git diff | less", []),
    ("", []),
])
def test_the_files_a_command_writes_are_read_from_its_words(command, written):
    expected = [path if path.startswith("/") else f"{CWD}/{path}" for path in written]
    assert written_paths(command, CWD) == expected


@pytest.mark.parametrize("command, written", [
    # Quotes and escapes: an operator in quotes is a word, a quoted name is one file.
    ("echo '>' not_a_file", []),
    ('echo ">>" x "|" rm y', []),
    ("echo a\\;rm b", []),
    ("echo > 'my file.txt'", ["my file.txt"]),
    ("echo \"2\">two", ["two"]),
    ("echo 2 > two", ["two"]),
    # Only the shell can say what a variable, a glob or a home names: no file.
    ("rm *.pyc src/[ab].py q?.py $TARGET ${DIR}/x ~/notes.txt", []),
    ("echo > $OUT", []),
    # Option look-alikes are options; after -- they are files.
    ("rm -f -r -- --force", ["--force"]),
    ("tee --append - log", ["log"]),
    ("sed -e 's/x/y/' -i -- -weird", ["-weird"]),
    # Outside the worktree and `..` are joined as given: the check keeps what is inside the repository.
    ("rm ../../etc/passwd /tmp/x ../sibling.py", ["/etc/passwd", "/tmp/x", "/repo/sibling.py"]),
])
def test_hostile_words_name_no_file_they_do_not_write(command, written):
    expected = [path if path.startswith("/") else f"{CWD}/{path}" for path in written]
    assert written_paths(command, CWD) == expected


@pytest.mark.parametrize("command", [
    "echo 'unbalanced > x",
    'echo "also > x',
    "echo trailing > x \\",
    "echo $(rm x.py) > y.py",
    "echo `rm x.py` > y.py",
    "rm \"$(pwd)/x.py\"",
    "cat <<EOF > out.py\nrm inner.py\nEOF",
    "cat <<-'EOF' > out.py\nx\nEOF",
    "diff <(cat a) b > out.py",
    "tee >(gzip > out.gz) < in",
    "rm " + "x" * LONGEST_READ,
])
def test_a_command_the_words_cannot_tell_names_no_file(command):
    assert written_paths(command, CWD) == []


def test_an_operator_is_told_from_a_word_that_reads_like_one():
    assert shell_tokens("a 2>&1|b '|' \\; c") == [("a", False), ("2>&", True), ("1", False), ("|", True),
                                                    ("b", False), ("|", False), (";", False), ("c", False)]


def test_reading_the_longest_command_stays_within_a_hooks_budget():
    commands = [f"echo {n} > 'file {n}.txt'" for n in range(2000)]
    while len(" && ".join(commands)) > LONGEST_READ:
        commands.pop()
    command = " && ".join(commands)
    started = time.perf_counter()
    paths = written_paths(command, CWD)
    elapsed = time.perf_counter() - started
    assert len(paths) > 100 and elapsed < 0.05, (len(paths), elapsed)


def test_no_command_breaks_the_reading():
    """Random text of shell syntax (a fixed seed): the reading answers a list of paths, and
    the probes' parser refuses with BadInput, never anything else."""
    from baton.errors import BadInput
    from baton.skills.runtime.command_words import parse_command

    pieces = [*"ab 12\t\n;&|<>()'\"\\$`#*~-=/.{}!", "rm ", "sed -i ", "mv ", "cp -t ", "git checkout -- ", "tee ",
              "cd ", "<<", "2>&1", "perl -pi ", "install "]
    rnd = random.Random(45)
    for _ in range(3000):
        command = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 40)))
        paths = written_paths(command, CWD)
        assert all(isinstance(path, str) and path.startswith("/") for path in paths), command
        with contextlib.suppress(BadInput):
            parse_command(command)
