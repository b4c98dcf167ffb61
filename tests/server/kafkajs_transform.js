// A kafkajs consume-transform-produce loop, driven by tests/server/test_transactions_clients.py.
//
// node kafkajs_transform.js BROKERS INPUT OUTPUT GROUP TRANSACTIONAL_ID TOTAL CRASH_ROUND
//
// Reads INPUT (READ_COMMITTED) as group GROUP and, per chunk of CHUNK records, writes "out-<value>"
// to the same partition of OUTPUT and the chunk's next offset to the group in one transaction. After
// the records of transaction CRASH_ROUND are acknowledged it prints "crash" and waits for a line on
// stdin (the test crashes a broker meanwhile), then commits. A failed transaction is aborted and
// the error thrown: kafkajs then delivers the batch again from the last offset it resolved. Prints
// "committed ROUND" after each commit and "done ROUNDS" once TOTAL records were committed.
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

const [brokers, input, output, groupId, transactionalId, total, crashRound] = process.argv.slice(2)
const CHUNK = 4
const lines = readline.createInterface({ input: process.stdin })
const nextLine = () => new Promise((resolve) => lines.once('line', resolve))

const kafka = new Kafka({
  clientId: 'transform',
  brokers: brokers.split(','),
  // KAFKAJS_LOG=INFO (or DEBUG) logs kafkajs to stderr, which the test shows when the loop fails
  logLevel: process.env.KAFKAJS_LOG ? logLevel[process.env.KAFKAJS_LOG] : logLevel.NOTHING,
  logCreator: () => ({ label, log }) => console.error(label, log.message, JSON.stringify(log)),
  retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 30 },
})

async function main () {
  const newProducer = () => kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
  let producer = newProducer()
  const consumer = kafka.consumer({
    groupId,
    readUncommitted: false,
    sessionTimeout: 10000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 500, // heartbeats and rejoins happen between fetches
  })
  await producer.connect()
  await consumer.connect()
  await consumer.subscribe({ topics: [input], fromBeginning: true })
  let done = 0
  let rounds = 0
  await new Promise((resolve, reject) => {
    consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
        for (let i = 0; i < batch.messages.length; i += CHUNK) {
          if (!isRunning() || isStale()) return
          const chunk = batch.messages.slice(i, i + CHUNK)
          const next = (BigInt(chunk[chunk.length - 1].offset) + 1n).toString()
          const transaction = await producer.transaction()
          try {
            await transaction.send({
              topic: output,
              messages: chunk.map((m) => ({
                partition: batch.partition,
                key: m.value,
                value: Buffer.concat([Buffer.from('out-'), m.value]),
              })),
            })
            rounds += 1
            if (rounds === Number(crashRound)) {
              console.log('crash')
              await nextLine()
            }
            await transaction.sendOffsets({
              consumerGroupId: groupId,
              topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }],
            })
            await transaction.commit()
            console.log(`committed ${rounds}`)
          } catch (error) {
            try {
              await transaction.abort()
            } catch {
              // kafkajs gives up on an abort its coordinator answers COORDINATOR_LOAD_IN_PROGRESS (just
              // after a failover) and stays ABORTING: as an application does, start a new producer with
              // the same transactional id, whose InitProducerId aborts the open transaction
              await producer.disconnect().catch(() => {})
              producer = newProducer()
              await producer.connect()
            }
            throw error
          }
          done += chunk.length
          if (done >= Number(total)) resolve()
          resolveOffset(chunk[chunk.length - 1].offset)
          await heartbeat() // throws while the group rebalances (its coordinator moved): fetched again
        }
      },
    }).catch(reject)
  })
  console.log(`done ${rounds}`)
  // every transaction is committed; a consumer still rejoining its group may take long to leave
  const leaving = Promise.all([consumer.disconnect(), producer.disconnect()])
  await Promise.race([leaving, new Promise((resolve) => setTimeout(resolve, 3000))])
  process.exit(0)
}

main().catch((error) => {
  console.error(String((error && error.stack) || error))
  process.exit(1)
})
