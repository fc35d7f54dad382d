"""What goes in and out of a command: errors and exit codes, checked inputs, staged outputs, progress, formats.

Shared by every command and by the Python API, below the catalogue, verify and
certify.
"""
