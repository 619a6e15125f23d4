"""A YAML writer for the config srtctl leaves in a job dir (no PyYAML on a login node's python3)."""

import json
import re

# What YAML 1.1 (PyYAML) reads as something other than a string: sexagesimal numbers (4:00:00)
# and timestamps (2026-12-01, 2026-12-01T09:54:23Z).
_IMPLICIT = re.compile(r"^[-+]?\d[\d_]*(?::[0-5]?\d)+(?:\.\d*)?$|^\d{4}-\d\d?-\d\d?(?:[Tt ].*)?$")


def yaml_scalar(value: "object") -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    text = str(value)
    plain = (
        text
        and text.strip() == text
        and text[0] not in "!&*-?{}[],#|>@`\"'%:~=<"
        and ": " not in text
        and " #" not in text
        and not text.endswith(":")
        and text.lower() not in ("null", "true", "false", "yes", "no", "on", "off", "y", "n", "~")
    )
    if plain and _IMPLICIT.match(text):
        plain = False
    if plain:
        try:
            float(text)
            plain = False  # would read back as a number
        except ValueError:
            pass
    if plain and all(ch.isprintable() for ch in text):
        return text
    return json.dumps(text, ensure_ascii=False)


def yaml_lines(value: "object", indent: int) -> "list[str]":
    pad = " " * indent
    lines = []  # type: list[str]
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        for key, item in value.items():
            head = pad + yaml_scalar(str(key)) + ":"
            lines.extend(yaml_item(head, item, indent))
        return lines
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        for item in value:
            if isinstance(item, dict) and item:
                sub = yaml_lines(item, indent + 2)
                lines.append(pad + "- " + sub[0][indent + 2 :])
                lines.extend(sub[1:])
            else:
                lines.extend(yaml_item(pad + "-", item, indent))
        return lines
    return [pad + yaml_scalar(value)]


def yaml_item(head: str, item: "object", indent: int) -> "list[str]":
    if isinstance(item, (dict, list)) and item:
        return [head, *yaml_lines(item, indent + 2)]
    if isinstance(item, str) and "\n" in item and all(ch.isprintable() or ch == "\n" for ch in item):
        body = item if item.endswith("\n") else item + "\n"
        chomp = "" if item.endswith("\n") and not item.endswith("\n\n") else ("-" if not item.endswith("\n") else "+")
        if body[0] == " ":
            return [head + " " + json.dumps(item, ensure_ascii=False)]
        pad = " " * (indent + 2)
        return [head + " |" + chomp] + [(pad + ln) if ln else "" for ln in body[:-1].split("\n")]
    if isinstance(item, (dict, list)):
        return [head + (" {}" if isinstance(item, dict) else " []")]
    return [head + " " + yaml_scalar(item)]


def to_yaml(value: "object") -> str:
    """A block-style YAML rendering of JSON-like data (config.yaml for people and tools)."""
    return "\n".join(yaml_lines(value, 0)) + "\n"
