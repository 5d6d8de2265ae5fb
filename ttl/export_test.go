package ttl

// DefaultEventQueue is the event queue's capacity when an EventQueue
// option is 0, for the tests.
const DefaultEventQueue = defaultEventQueue
