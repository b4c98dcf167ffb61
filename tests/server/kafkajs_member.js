// A kafkajs consumer (the classic group protocol) in its own node process, for the wire tests.
// Usage: node kafkajs_member.js BOOTSTRAP GROUP TOPIC WANT
// Reads TOPIC from the beginning as a member of GROUP until WANT records, prints them as a sorted
// JSON array, commits and leaves; exits 1 with one line on stderr on any error.
const { Kafka, logLevel } = require("kafkajs");

const [bootstrap, group, topic, want] = process.argv.slice(2);
const kafka = new Kafka({ brokers: bootstrap.split(","), clientId: "kafkajs", logLevel: logLevel.NOTHING });
const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, rebalanceTimeout: 10000 });

async function main() {
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    consumer
      .run({
        eachMessage: async ({ message }) => {
          got.push(message.value.toString());
          if (got.length >= Number(want)) resolve();
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  console.log(JSON.stringify(got.sort()));
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error.message);
    process.exit(1);
  },
);
