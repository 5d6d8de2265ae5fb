package sandbox

// OwnAgent is ownAgent, for the tests.
var OwnAgent = ownAgent
