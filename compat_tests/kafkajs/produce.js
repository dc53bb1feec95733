'use strict'
// kafkajs producer: sends the messages read from stdin in chunks of `chunkSize` (one
// producer.send per chunk, so several record batches per partition) and prints the
// RecordMetadata kafkajs returned for every send: {"sends": [[{partition, baseOffset, ...}]]}.
//
// Args: bootstrap, topic, messages [{key, value, headers, timestamp?}], acks (default -1),
// compression ("none" | "gzip" - the only codec kafkajs ships), chunkSize, idempotent,
// concurrent (all chunks sent at once), autoCreate; or topicMessages [{topic, messages}] for
// one producer.sendBatch across topics.

const { CompressionTypes } = require('kafkajs')
const { main, makeKafka, toKafkaMessages } = require('./lib')

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

main(async args => {
  const compression = CODECS[args.compression || 'none']
  if (compression === undefined) throw new Error(`kafkajs has no built-in codec ${args.compression}`)
  const producer = makeKafka(args, 'kafkapy-compat-producer').producer({
    idempotent: Boolean(args.idempotent),
    maxInFlightRequests: args.idempotent ? 1 : undefined,
    allowAutoTopicCreation: args.autoCreate === true
  })
  await producer.connect()
  const sends = []
  try {
    if (args.topicMessages) {
      // One sendBatch: a single Produce request carrying several topics.
      sends.push(
        await producer.sendBatch({
          acks: args.acks === undefined ? -1 : args.acks,
          compression,
          topicMessages: args.topicMessages.map(t => ({
            topic: t.topic,
            messages: toKafkaMessages(t.messages)
          }))
        })
      )
      return { sends }
    }
    const messages = toKafkaMessages(args.messages)
    const chunkSize = args.chunkSize || messages.length
    const send = chunk =>
      producer.send({
        topic: args.topic,
        acks: args.acks === undefined ? -1 : args.acks,
        compression,
        messages: chunk
      })
    const chunks = []
    for (let i = 0; i < messages.length; i += chunkSize) chunks.push(messages.slice(i, i + chunkSize))
    if (args.concurrent) {
      // All sends at once: kafkajs pipelines the Produce requests on one connection, so the
      // broker must answer them in request order (results stay in chunk order here).
      sends.push(...(await Promise.all(chunks.map(send))))
    } else {
      for (const chunk of chunks) sends.push(await send(chunk))
    }
  } finally {
    await producer.disconnect()
  }
  return { sends }
})
