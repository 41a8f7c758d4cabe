"""Transformer training at scale: model shapes, parallel layouts, their step time and memory."""
