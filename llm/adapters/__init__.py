"""Providers behind the ChatModel protocol."""
