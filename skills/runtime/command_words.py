"""A command written as shell-style words: split into the argument vector Baton runs
without a shell (checks and probes) or matches (the `[handoff] allow` setting), or read,
never run, for the files a shell would write running it (an agent's shell tool)."""

from __future__ import annotations

import os
import re
import shlex

from baton.errors import BadInput

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Operators shlex runs together when no blank parts them ("2>&1;", "&&>"), split apart.
_OPERATOR = re.compile(r"&>>|&>|>>|>&|>\||<<<|<<|<>|<&|&&|\|\||[<>;&|()\n]")
LONGEST_READ = 4096  # characters of a shell command read for its files: beyond, it is not checked (bench/pre_edit.py)


def shell_tokens(command: str) -> list[tuple[str, bool]]:
    """(token, is it an operator) for each word and operator of command as a POSIX shell
    splits it: a newline ends a command as `;` does, a quoted or escaped `>` is a word, a
    file descriptor's number belongs to its redirection (`2>`), and a comment is left out.
    ValueError for unbalanced quotes."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace, lexer.whitespace_split, lexer.commenters = " \t\r", True, ""
    tokens: list[tuple[str, bool]] = []
    start, glued, comment = 0, False, False
    while (token := lexer.get_token()) is not None:
        # The text the token came from tells an operator from a quoted word that reads like one.
        end = lexer.instream.tell() - len(lexer._pushback_chars)  # type: ignore[attr-defined]
        raw, start = command[start:end], end
        plain = raw.strip(" \t\r") == token
        if comment or (plain and token.startswith("#")):  # a comment runs to the end of its line
            comment = not (plain and "\n" in token and not token.startswith("#"))
            if comment:
                continue
            token = token[token.index("\n"):]
        if not plain or token.strip("();<>|&\n"):
            tokens.append((token, False))
        else:
            operators = _OPERATOR.findall(token)
            if glued and tokens[-1][0].isdigit() and operators[0][0] in "<>":
                operators[0] = tokens.pop()[0] + operators[0]
            tokens.extend((operator, True) for operator in operators)
        glued = plain and raw == raw.rstrip(" \t\r")
    return tokens


def parse_command(command: str) -> list[str]:
    """The argument vector of a probe command written as shell-style words. BadInput names what
    no shell-less probe can use: unbalanced quotes, shell syntax (pipes, redirections, command
    lists, substitutions) or leading environment assignments."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise BadInput(f"probe command {command!r} cannot be split into words: {exc}") from None
    if not argv:
        raise BadInput("probe command is empty")
    if _ASSIGNMENT.match(argv[0]):
        raise BadInput(f"probe command {command!r} sets an environment variable ({argv[0]}): probes run "
                       "with a minimal environment and no shell")
    syntax = [token for token, operator in shell_tokens(command) if operator and token != "\n"]
    if syntax or any("$(" in word or "`" in word for word in argv):
        shown = syntax[0] if syntax else "$(...)"
        raise BadInput(f"probe command {command!r} uses shell syntax ({shown}): probes run without a shell; "
                       "put the pipeline in a script and probe the script")
    return argv


# Words that run the command after them (their own options are not read).
_PREFIXES = frozenset(["if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "sudo", "env",
                       "command", "nohup", "exec", "builtin"])
# The options that take a value (as the next word), of the commands whose operands are files.
_VALUED = {"touch": {"-d", "-r", "-t"}, "truncate": {"-s", "-r"}, "rm": set(), "tee": set(),
           "mv": {"-t", "-S"}, "cp": {"-t", "-S"}, "install": {"-t", "-S", "-m", "-o", "-g"},
           "sed": {"-e", "-f", "-l"}, "perl": {"-e", "-E", "-I", "-M", "-m", "-x"},
           "restore": {"-s"}, "checkout": set()}
_SCRIPT = {"sed": re.compile(r"-[a-zA-Z]*[ef]|--(expression|file)"), "perl": re.compile(r"-[a-zA-Z]*[eE]")}
_IN_PLACE = re.compile(r"-[a-zA-Z]*i|--in-place")
_UNREAD = re.compile(r"[$*?\[`]|^~")  # a word whose file only the shell can name (a variable, a glob, a home)


def written_paths(command: str, cwd: str) -> list[str]:
    """The files a shell command would write or remove, read from its words and never run:
    redirections (`>`, `>>`, `&>`, `2>`), `tee`, `sed -i` and `perl -i`, the destinations of
    `mv` (its sources too), `cp` and `install`, `rm`, `touch`, `truncate`, `dd of=`, `git
    checkout -- FILE` and `git restore FILE`, in each command of a list or pipeline; each
    joined to cwd, which a `cd` of the list moves. A word only the shell can resolve (a
    variable, a glob) names no file; a command these words cannot tell (unbalanced quotes,
    a substitution, a heredoc, a process substitution, too long) names none."""
    if len(command) > LONGEST_READ or "$(" in command or "`" in command:
        return []
    try:
        tokens = shell_tokens(command)
    except ValueError:
        return []
    paths: list[str] = []
    words: list[str] = []
    where: str | None = cwd  # None after a `cd` to a place the words cannot tell
    redirect = None
    for index, (token, operator) in enumerate(tokens):
        if not operator:
            if redirect is not None:
                if ">" in redirect and not (redirect.endswith("&") and (token.isdigit() or token == "-")):
                    paths.append(_joined(where, token))
                redirect = None
            else:
                words.append(token)
        elif (token.startswith("<<") and token != "<<<") or (
                token[-1] in "<>" and tokens[index + 1:index + 2] == [("(", True)]):
            return []  # a heredoc's lines or a process substitution's command are not words of this one
        elif "<" in token or ">" in token:
            redirect = token
        else:
            where, words, redirect = _command(words, where, paths), [], None
    _command(words, where, paths)
    return list(dict.fromkeys(path for path in paths if path))


def _joined(where: str | None, word: str) -> str:
    if word in ("", "-") or _UNREAD.search(word) or (where is None and not os.path.isabs(word)):
        return ""
    return os.path.normpath(os.path.join(where or "", word))


def _command(words: list[str], where: str | None, paths: list[str]) -> str | None:
    """Adds the files one simple command writes to paths; the directory the next command runs in."""
    while words and (words[0] in _PREFIXES or _ASSIGNMENT.match(words[0])):
        words = words[1:]
    if not words:
        return where
    name, args = os.path.basename(words[0]), words[1:]
    if name == "cd":
        return _joined(where, args[0]) or None if args and args[0] != "-" else None
    if name == "git":
        while args and args[0].startswith("-"):
            if args[0] == "-C" and len(args) > 1:
                where = _joined(where, args[1]) or None
            args = args[2:] if args[0] in ("-C", "-c", "--git-dir", "--work-tree") else args[1:]
        name, args = (args[0], args[1:]) if args and args[0] in ("restore", "checkout") else ("git", [])
        if name == "checkout":
            args = ["--", *args[args.index("--") + 1:]] if "--" in args else []
    if name == "dd":
        paths.extend(_joined(where, arg[3:]) for arg in args if arg.startswith("of="))
    if name not in _VALUED:
        return where
    options, values, operands = _read_options(args, _VALUED[name])
    if name in _SCRIPT:  # the script is the first operand unless an option gives it (-e, or -eSCRIPT)
        script = _SCRIPT[name]
        if not any(_IN_PLACE.match(option) for option in [*options, *values]):
            return where
        if not any(script.fullmatch(option) for option in values) and not any(
                script.match(option) and not script.fullmatch(option) for option in options):
            operands = operands[1:]
    elif name in ("mv", "cp", "install"):
        operands = _copied_to(name, options, values, operands, where)
    paths.extend(_joined(where, operand) for operand in operands)
    return where


def _read_options(args: list[str], valued: set[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """(options without a value, options with their values, operands) of a command's arguments."""
    options: list[str] = []
    values: dict[str, str] = {}
    operands: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            operands.extend(rest)
        elif arg in valued or (arg.startswith("--") and "=" in arg):
            name, _, value = arg.partition("=")
            values[name] = value or next(rest, "")
        elif arg.startswith("-") and arg != "-":
            options.append(arg)
        else:
            operands.append(arg)
    return options, values, operands


def _copied_to(name: str, options: list[str], values: dict[str, str], operands: list[str],
               where: str | None) -> list[str]:
    """The files mv, cp or install writes (mv: and the sources it removes)."""
    if name == "install" and ("-d" in options or "--directory" in options):
        return []
    into = values.get("-t") or values.get("--target-directory")
    if not into and len(operands) > 1 and "-T" not in options:
        last = _joined(where, operands[-1])
        if len(operands) > 2 or operands[-1].endswith("/") or (last and os.path.isdir(last)):
            into, operands = operands[-1], operands[:-1]
    if into:
        sources, written = operands, [os.path.join(into, os.path.basename(source.rstrip("/"))) for source in operands]
    elif len(operands) > 1:
        sources, written = operands[:-1], operands[-1:]
    else:
        return []
    return written + (sources if name == "mv" else [])
