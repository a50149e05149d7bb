"""Rust source read as text, shared by scripts/circles and scripts/long-files."""

import re


def blank(text):
    """`text` with comments, strings and char literals turned into spaces, newlines kept, so
    offsets and line numbers stay those of the file."""
    out, i, n = list(text), 0, len(text)

    def wipe(start, end):
        for k in range(start, min(end, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            wipe(i, j)
            i = j
        elif text[i] in "br" and (m := re.match(r'b?r(#*)"', text[i:i + 40])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find('"' + m.group(1), i + m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            wipe(i, j)
            i = j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            wipe(i, j + 1)
            i = j + 1
        elif text[i] == "'" and (m := re.match(r"'(\\.[^']*|[^\\'])'", text[i:])):
            wipe(i, i + m.end())
            i += m.end()
        else:
            i += 1
    return "".join(out)
