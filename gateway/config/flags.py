"""The flags of ``squall serve``, generated from the settings model.

Every field with a flag (see :func:`gateway.config.sources.has_flag`) becomes
``--<name-with-dashes>`` in its section's group, with the field's description as help and
its default shown. A flag takes the text as given (the model parses it, so a bad value
is refused with the flag's name, see :mod:`gateway.config.sources`) and is ``None``
when not given. A boolean whose default is true is only turned off (``--no-sigv2``),
one whose default is false only turned on (``--public-status``); a ``Literal`` gives
the choices.

pydantic-settings' ``CliSettingsSource`` is not used: it would add ``--sigv2`` beside
``--no-sigv2`` and parse values itself, where the errors should name the flag and the
accepted form the same way as for the environment and the file.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic.fields import FieldInfo

from backends.core.unit_types import DURATION, SIZE, unit_of
from backends.core.units import format_size
from gateway.config.sources import Section, flag_name, has_flag


def add_setting_flags(parser: argparse.ArgumentParser,
                      sections: tuple[type[Section], ...]) -> None:
    """One flag per field of ``sections`` that has one, grouped by section."""
    for section in sections:
        group = (parser if section.title is None
                 else parser.add_argument_group(section.title))
        for name, field in section.model_fields.items():
            if has_flag(field):
                spelling, options = flag_options(name, field)
                group.add_argument(spelling, **options)


def flag_options(name: str, field: FieldInfo) -> tuple[str, dict[str, Any]]:
    """The spelling of a field's flag and the keyword arguments of ``add_argument``."""
    help_text = (field.description or "").replace("%", "%%")
    if field.annotation is bool:
        if field.default is not True:
            return flag_name(name), {"dest": name, "action": "store_const", "const": True,
                                     "help": help_text}
        return "--no-" + name.replace("_", "-"), {
            "dest": name, "action": "store_const", "const": False,
            "help": f"turn off (on by default): {help_text}"}
    default = _default_text(field)
    options: dict[str, Any] = {"dest": name, "default": None,
                               "help": help_text + (f" (default {default})" if default else "")}
    choices = _choices(field.annotation)
    if choices:
        options["choices"] = choices
    else:
        options["metavar"] = _metavar(name, field)
    return flag_name(name), options


def _metavar(name: str, field: FieldInfo) -> str:
    unit = unit_of(field)
    if unit is not None:
        return unit.metavar
    kinds = {a for a in get_args(field.annotation) if a is not type(None)} or {field.annotation}
    if kinds <= {int, float}:
        return "N"
    if kinds == {Path}:
        return "PATH"
    return name.upper()


def _choices(annotation: Any) -> list[str] | None:
    if get_origin(annotation) is Literal:
        return [str(a) for a in get_args(annotation)]
    return None


def _default_text(field: FieldInfo) -> str | None:
    """The default as a user would write it; None when there is none to show."""
    value = field.get_default(call_default_factory=True)
    if value is None or value == [] or isinstance(value, bool):
        return None
    unit = unit_of(field)
    if unit is SIZE:
        return format_size(value)
    if unit is DURATION:
        return f"{value:g}s"
    if isinstance(value, (str, Path, int, float)):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return None
