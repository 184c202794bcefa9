"""The ``engram`` command: argparse front end over the Python API.

Every ``engram/cli/cmd_*.py`` module registers its commands; each keeps heavy imports inside its
handlers so that ``engram save``/``search`` start fast.
"""
