"""Quadrants' path of the BufferView annotation type (`quadrants.types.buffer_view_type.BufferViewType`)."""

from qd.types.annotations import BufferViewType

__all__ = ["BufferViewType"]
