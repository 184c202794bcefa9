"""The local HTTP face (`engram serve`): the litestar app, its routes and typed bodies."""
