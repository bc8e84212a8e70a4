// Preloaded into kinesalite (node -r) by kinesis_spout.testing.emulators.KinesaliteServer.
//
// kinesalite rethrows every error of an incoming request (index.js: req.on('error', ... throw err)). A client killed
// while it sends a request body (the SIGKILL tests do that on purpose) makes node report the request as "aborted"
// (ECONNRESET), and the rethrow ends the whole server. A client that went away is not the server's failure: those
// errors are logged and the server goes on. Any other uncaught error still ends the process, with its stack.
'use strict'

process.on('uncaughtException', function(err) {
  if (err && (err.code === 'ECONNRESET' || err.message === 'aborted')) {
    console.error('kinesis-spout guard: a client went away mid-request (' + (err.code || err.message) + '); ignored')
    return
  }
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
