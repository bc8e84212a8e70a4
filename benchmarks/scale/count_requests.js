// Preloaded into kinesalite by the scale benchmark (NODE_OPTIONS="--require <this file>"): counts the HTTP requests
// the server receives by Kinesis operation (the X-Amz-Target header's last part) and rewrites the counts as JSON to
// the file named by KINESIS_SPOUT_COUNT_FILE every half second. It changes no reply.
'use strict'
const fs = require('fs')
const http = require('http')

const out = process.env.KINESIS_SPOUT_COUNT_FILE
const counts = {}
const emit = http.Server.prototype.emit
http.Server.prototype.emit = function (event, request) {
  if (event === 'request' && request && request.headers) {
    const target = String(request.headers['x-amz-target'] || 'other').split('.').pop()
    counts[target] = (counts[target] || 0) + 1
  }
  return emit.apply(this, arguments)
}
if (out) {
  setInterval(function () {
    fs.writeFileSync(out + '.tmp', JSON.stringify(counts))
    fs.renameSync(out + '.tmp', out)
  }, 500).unref()
}
