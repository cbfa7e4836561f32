"""User turns (interactions) for verl 0.9, in verl <= 0.7's format."""

from extensions.interactions.base import BaseInteraction
from extensions.interactions.registry import load_interactions

__all__ = ["BaseInteraction", "load_interactions"]
