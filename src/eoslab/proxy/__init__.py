"""The Kafka-aware chaos proxy: a lab service in front of every client listener, forwarding
Kafka frames and breaking exactly the ones a fault selects (`python -m eoslab.proxy`)."""
