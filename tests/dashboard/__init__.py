"""Tests of the team dashboard (cloud server HTML pages)."""
