package pgnotify

// Chunk exposes chunk to the tests.
var Chunk = chunk
