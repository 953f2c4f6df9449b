package gapwatch;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.Comparator;
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
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsResult;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.MemberAssignment;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;

/**
 * Classic and consumer (KIP-848) groups described, then their committed offsets read, as one JSON
 * text: the poll's steps 3 and 4 (adapters/kafka/snapshot.py) at 3,000 groups.
 *
 * <p>Through librdkafka each group's offsets are one call (confluent-kafka-python #1947) and every
 * member and offset one Python object; here the Admin batches both per coordinator inside the JVM,
 * and Python parses one text. Every group is described before any offset is asked, as the poll's
 * bounds need. A group the cluster no longer knows (deleted since it was listed) or that is Dead is
 * left out; a group whose answer is any other error is named in "others", for the caller to read
 * through librdkafka, which says the error in words (a refused ACL, a group of another protocol).
 *
 * <p>{@link #readers} asks the same of the groups, only about some topics, and answers only which
 * groups read them: the watcher's question when it sees partitions added (3,000 groups' JSON,
 * filtered in Python, made detection at 60k partitions 1.15 s against 0.80 s).
 */
public final class GroupReads {
    private GroupReads() {}

    /**
     * Reads the groups in {@code groupIds} ("length:id" after one another, the length in code
     * points: a group id may hold any character). {@code partitions} ("topic partition" lines)
     * limits the offsets read to those partitions; empty reads all of each group's.
     */
    public static String of(Admin admin, String groupIds, String partitions, int timeoutMs) throws Exception {
        List<TopicPartition> wanted = new ArrayList<>();
        for (String line : partitions.split("\n")) {
            if (!line.isEmpty()) {
                int space = line.lastIndexOf(' ');
                wanted.add(new TopicPartition(line.substring(0, space), Integer.parseInt(line.substring(space + 1))));
            }
        }
        return json(read(admin, parseIds(groupIds), wanted, true, timeoutMs));
    }

    /**
     * Which of the groups in {@code groupIds} read any topic of {@code topicCounts} ("name count"
     * lines: the topic's partition count), as "length:id" after one another: a member is assigned
     * (or, KIP-848, targeted) one of its partitions, or the group has a commit on one. A group whose
     * answer is an error other than "no such group" is named too, for the caller to read it and
     * report its error as a full read would. Descriptions and commits are asked at once: no bound
     * rests on this answer, only which groups a targeted poll reads.
     */
    public static String readers(Admin admin, String groupIds, String topicCounts, int timeoutMs) throws Exception {
        Set<String> topics = new TreeSet<>();
        List<TopicPartition> wanted = new ArrayList<>();
        for (String line : topicCounts.split("\n")) {
            if (!line.isEmpty()) {
                int space = line.lastIndexOf(' ');
                String topic = line.substring(0, space);
                topics.add(topic);
                for (int partition = 0; partition < Integer.parseInt(line.substring(space + 1)); partition++) {
                    wanted.add(new TopicPartition(topic, partition));
                }
            }
        }
        Read read = read(admin, parseIds(groupIds), wanted, false, timeoutMs);
        Set<String> readers = new TreeSet<>(read.others);
        for (Map.Entry<String, ConsumerGroupDescription> entry : read.described.entrySet()) {
            if (assigned(entry.getValue(), topics)) {
                readers.add(entry.getKey());
            }
        }
        for (Map.Entry<String, Map<TopicPartition, OffsetAndMetadata>> entry : read.offsets.entrySet()) {
            for (OffsetAndMetadata offset : entry.getValue().values()) {
                if (offset != null && offset.offset() >= 0) {
                    readers.add(entry.getKey());
                    break;
                }
            }
        }
        StringBuilder text = new StringBuilder();
        for (String id : readers) {
            text.append(id.codePointCount(0, id.length())).append(':').append(id);
        }
        return text.toString();
    }

    /** The groups read: descriptions and commits of those the cluster knows and that are not Dead. */
    private record Read(List<String> ids, Map<String, ConsumerGroupDescription> described,
                        Map<String, Map<TopicPartition, OffsetAndMetadata>> offsets, List<String> others) {}

    /**
     * Describes the groups and reads their commits ({@code wanted} partitions only, or all of each
     * group's when empty), both batched per coordinator. With {@code describeFirst} no commit is
     * asked before every group is described, as the poll's bounds need; else both at once.
     */
    private static Read read(Admin admin, List<String> ids, List<TopicPartition> wanted, boolean describeFirst,
                             int timeoutMs) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs + 5000L);
        List<String> others = new ArrayList<>();
        Map<String, ConsumerGroupDescription> described = new HashMap<>();
        Map<String, Map<TopicPartition, OffsetAndMetadata>> offsets = new HashMap<>();
        if (ids.isEmpty()) {
            return new Read(ids, described, offsets, others);
        }
        Map<String, KafkaFuture<ConsumerGroupDescription>> futures = admin.describeConsumerGroups(
                ids, new DescribeConsumerGroupsOptions().timeoutMs(timeoutMs)).describedGroups();
        ListConsumerGroupOffsetsResult committed = describeFirst ? null : commits(admin, ids, wanted, timeoutMs);
        for (String id : ids) {
            try {
                ConsumerGroupDescription description = futures.get(id).get(left(deadline), TimeUnit.NANOSECONDS);
                if (description.groupState() != GroupState.DEAD) {
                    described.put(id, description);
                }
            } catch (ExecutionException error) {
                if (!(error.getCause() instanceof GroupIdNotFoundException)) {
                    others.add(id);
                }
            }
        }
        if (described.isEmpty()) {
            return new Read(ids, described, offsets, others);
        }
        if (committed == null) {  // asked only once every group is described
            committed = commits(admin, new ArrayList<>(described.keySet()), wanted, timeoutMs);
        }
        for (String id : ids) {
            if (!described.containsKey(id)) {
                continue;
            }
            try {
                offsets.put(id, committed.partitionsToOffsetAndMetadata(id).get(left(deadline), TimeUnit.NANOSECONDS));
            } catch (ExecutionException error) {
                described.remove(id);
                if (!(error.getCause() instanceof GroupIdNotFoundException)) {
                    others.add(id);
                }
            }
        }
        return new Read(ids, described, offsets, others);
    }

    private static ListConsumerGroupOffsetsResult commits(Admin admin, List<String> ids, List<TopicPartition> wanted,
                                                          int timeoutMs) {
        Map<String, ListConsumerGroupOffsetsSpec> specs = new HashMap<>();
        for (String id : ids) {
            specs.put(id, wanted.isEmpty() ? new ListConsumerGroupOffsetsSpec()
                                           : new ListConsumerGroupOffsetsSpec().topicPartitions(wanted));
        }
        return admin.listConsumerGroupOffsets(specs, new ListConsumerGroupOffsetsOptions().timeoutMs(timeoutMs));
    }

    private static String json(Read read) throws Exception {
        StringWriter text = new StringWriter();
        try (JsonGenerator json = new JsonFactory().createGenerator(text)) {
            json.writeStartObject();
            json.writeArrayFieldStart("groups");
            for (String id : read.ids) {
                ConsumerGroupDescription description = read.described.get(id);
                if (description == null) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> offsets = read.offsets.get(id);
                json.writeStartObject();
                json.writeStringField("id", id);
                json.writeStringField("state", description.groupState().toString());
                json.writeStringField("type", description.type().name().toLowerCase());
                json.writeStringField("assignor", description.partitionAssignor() == null ? ""
                                                  : description.partitionAssignor());
                json.writeArrayFieldStart("members");
                for (MemberDescription member : description.members()) {
                    json.writeStartArray();
                    json.writeString(member.consumerId());
                    json.writeString(member.clientId() == null ? "" : member.clientId());
                    json.writeString(member.host() == null ? "" : member.host());
                    writePartitions(json, member.assignment());
                    writePartitions(json, member.targetAssignment().orElse(null));
                    json.writeEndArray();
                }
                json.writeEndArray();
                json.writeArrayFieldStart("committed");
                List<Map.Entry<TopicPartition, OffsetAndMetadata>> entries = new ArrayList<>(offsets.entrySet());
                entries.sort(Comparator.comparing((Map.Entry<TopicPartition, OffsetAndMetadata> entry) ->
                        entry.getKey().topic()).thenComparingInt(entry -> entry.getKey().partition()));
                for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : entries) {
                    if (entry.getValue() != null && entry.getValue().offset() >= 0) {
                        json.writeStartArray();
                        json.writeString(entry.getKey().topic());
                        json.writeNumber(entry.getKey().partition());
                        json.writeNumber(entry.getValue().offset());
                        json.writeEndArray();
                    }
                }
                json.writeEndArray();
                json.writeEndObject();
            }
            json.writeEndArray();
            json.writeArrayFieldStart("others");
            for (String id : read.others) {
                json.writeString(id);
            }
            json.writeEndArray();
            json.writeEndObject();
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

    private static void writePartitions(JsonGenerator json, MemberAssignment assignment) throws Exception {
        json.writeStartArray();
        if (assignment != null) {
            for (TopicPartition partition : assignment.topicPartitions()) {
                json.writeStartArray();
                json.writeString(partition.topic());
                json.writeNumber(partition.partition());
                json.writeEndArray();
            }
        }
        json.writeEndArray();
    }

    static List<String> parseIds(String text) {
        List<String> ids = new ArrayList<>();
        int at = 0;
        while (at < text.length()) {
            int colon = text.indexOf(':', at);
            int codePoints = Integer.parseInt(text.substring(at, colon));
            int end = text.offsetByCodePoints(colon + 1, codePoints);
            ids.add(text.substring(colon + 1, end));
            at = end;
        }
        return ids;
    }

    private static long left(long deadline) {
        return Math.max(1L, deadline - System.nanoTime());
    }
}
