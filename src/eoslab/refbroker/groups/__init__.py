"""The group coordinator: Kafka's classic consumer groups and their durable committed offsets.

group_coordinator.py holds the rules (GroupCoordinator), classic_group.py one group's members
and state machine (ClassicGroup), committed_offsets.py the durable offsets and group records
(the broker's __consumer_offsets), handlers.py the group APIs' wire side.
"""
