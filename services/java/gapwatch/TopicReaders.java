package gapwatch;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberAssignment;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;

/**
 * The classic and consumer (KIP-848) groups that read some topics, as text: the groups Gapwatch's
 * watcher must read when it sees partitions added to those topics.
 *
 * <p>A group reads a topic when a member is assigned (or, KIP-848, targeted) one of its partitions,
 * or when it has a commit on one. Every group the cluster lists is asked, in two batched requests
 * per coordinator (describe, then committed offsets of the topics' partitions), inside the JVM: at
 * 3,000 groups, doing this through librdkafka cost the tick seconds of Python objects. A group whose
 * answer is an error other than "no such group" is named too: the caller reads it and reports its
 * error as a full read would.
 */
public final class TopicReaders {
    private TopicReaders() {}

    /**
     * The readers of the topics in {@code topicCounts} ("name count" lines: the topic's partition
     * count), each group id written as "length:id" (a group id may hold any character). A listing
     * that fails throws: the caller then reads every group.
     */
    public static String of(Admin admin, String topicCounts, int timeoutMs) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs + 5000L);
        Set<String> topics = new TreeSet<>();
        List<TopicPartition> partitions = new ArrayList<>();
        for (String line : topicCounts.split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            int space = line.lastIndexOf(' ');
            String topic = line.substring(0, space);
            topics.add(topic);
            for (int partition = 0; partition < Integer.parseInt(line.substring(space + 1)); partition++) {
                partitions.add(new TopicPartition(topic, partition));
            }
        }
        Collection<GroupListing> listings = admin.listGroups(ListGroupsOptions.forConsumerGroups().timeoutMs(timeoutMs))
                .all().get(left(deadline), TimeUnit.NANOSECONDS);
        List<String> ids = new ArrayList<>();
        for (GroupListing listing : listings) {
            if (!listing.groupId().isEmpty()) {
                ids.add(listing.groupId());
            }
        }
        Set<String> readers = new TreeSet<>();
        if (ids.isEmpty()) {
            return "";
        }
        Map<String, KafkaFuture<ConsumerGroupDescription>> described = admin.describeConsumerGroups(
                ids, new DescribeConsumerGroupsOptions().timeoutMs(timeoutMs)).describedGroups();
        Map<String, ListConsumerGroupOffsetsSpec> specs = new HashMap<>();
        for (String id : ids) {
            specs.put(id, new ListConsumerGroupOffsetsSpec().topicPartitions(partitions));
        }
        var committed = admin.listConsumerGroupOffsets(specs, new ListConsumerGroupOffsetsOptions().timeoutMs(timeoutMs));
        for (String id : ids) {
            try {
                ConsumerGroupDescription description = described.get(id).get(left(deadline), TimeUnit.NANOSECONDS);
                if (description.groupState() != GroupState.DEAD && assigned(description, topics)) {
                    readers.add(id);
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> offsets =
                        committed.partitionsToOffsetAndMetadata(id).get(left(deadline), TimeUnit.NANOSECONDS);
                for (OffsetAndMetadata offset : offsets.values()) {
                    if (offset != null && offset.offset() >= 0) {
                        readers.add(id);
                        break;
                    }
                }
            } catch (ExecutionException error) {
                if (!(error.getCause() instanceof GroupIdNotFoundException)) {
                    readers.add(id);
                }
            }
        }
        StringBuilder text = new StringBuilder();
        for (String id : readers) {
            text.append(id.codePointCount(0, id.length())).append(':').append(id);
        }
        return text.toString();
    }

    private static boolean assigned(ConsumerGroupDescription description, Set<String> topics) {
        for (MemberDescription member : description.members()) {
            if (holds(member.assignment(), topics)
                    || (member.targetAssignment().isPresent() && holds(member.targetAssignment().get(), topics))) {
                return true;
            }
        }
        return false;
    }

    private static boolean holds(MemberAssignment assignment, Set<String> topics) {
        for (TopicPartition partition : assignment.topicPartitions()) {
            if (topics.contains(partition.topic())) {
                return true;
            }
        }
        return false;
    }

    private static long left(long deadline) {
        return Math.max(1L, deadline - System.nanoTime());
    }
}
