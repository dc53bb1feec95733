'use strict'
// kafkajs transactional producer (transactionalId + idempotent: true): runs each step as one
// transaction - send its messages, then commit or abort - and prints {"steps": [{action,
// sends}]} with the RecordMetadata of every send.
//
// Args: bootstrap, topic, transactionalId, transactionTimeoutMs, steps [{action: "commit" |
// "abort" | "leave-open", messages,
// sendOffsets?: {groupId, topic, partitions: [{partition, offset}]}}].
// Why several transactions on one producer: the second one reuses the producer id and epoch
// that InitProducerId handed out, the path where sequence and epoch bookkeeping usually breaks.

const { main, makeKafka, toKafkaMessages } = require('./lib')

main(async args => {
  const producer = makeKafka(args, 'kafkapy-compat-txn').producer({
    transactionalId: args.transactionalId,
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: args.transactionTimeoutMs || 30000,
    allowAutoTopicCreation: false
  })
  await producer.connect()
  const steps = []
  try {
    for (const step of args.steps) {
      const txn = await producer.transaction()
      const sends = []
      try {
        sends.push(await txn.send({ topic: args.topic, messages: toKafkaMessages(step.messages) }))
        if (step.sendOffsets) {
          // Consume-transform-produce: the group's offsets commit or abort with the messages.
          await txn.sendOffsets({
            consumerGroupId: step.sendOffsets.groupId,
            topics: [{ topic: step.sendOffsets.topic, partitions: step.sendOffsets.partitions }]
          })
        }
      } catch (err) {
        await txn.abort()
        throw err
      }
      if (step.action === 'commit') {
        await txn.commit()
      } else if (step.action === 'abort') {
        await txn.abort()
      } else if (step.action === 'leave-open') {
        // A producer that dies mid-transaction: no EndTxn, so only the broker's transaction
        // timeout (transactionTimeoutMs) can abort it and release read_committed consumers.
      } else {
        throw new Error(`unknown transaction action ${step.action}`)
      }
      steps.push({ action: step.action, sends })
    }
  } finally {
    await producer.disconnect()
  }
  return { steps }
})
