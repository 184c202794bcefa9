"""Tests of the benchmark scripts' data and their smallest runs."""
